# ruff: noqa: RUF001  (samples use their scripts' own punctuation)
"""Token estimates of text in scripts whose letters cost more than accented Latin (Indic, Thai, Ethiopic, ...).

The real counts are constants: ``len(enc.encode_ordinary(text))`` with tiktoken's o200k_base and
cl100k_base, loaded offline from litellm's bundled files as ``benchmarks/bench_policy.py`` does.
The samples were written for this test and were not used to fit the coefficients.
"""

from __future__ import annotations

import msgspec
import pytest

from aiden.policy.tokens import CL100K, O200K, SCRIPTS, estimate_tokens, text_features

# (script, sample, real o200k_base tokens, real cl100k_base tokens)
SAMPLES = [
    ("Greek", "Το αρχείο είναι μεγαλύτερο από το επιτρεπόμενο μέγεθος. Επιλέξτε ένα μικρότερο αρχείο ή δοκιμάστε ξανά αργότερα.", 40, 103),
    ("Armenian", "Ֆայլը թույլատրված չափից մեծ է։ Խնդրում ենք ընտրել ավելի փոքր ֆայլ կամ կրկին փորձել ավելի ուշ։", 29, 171),
    ("Hebrew", "הקובץ גדול מהגודל המותר. אנא בחר קובץ קטן יותר או נסה שוב מאוחר יותר.", 28, 69),
    ("Arabic", "حجم الملف أكبر من الحد المسموح به. يرجى اختيار ملف أصغر أو المحاولة مرة أخرى لاحقاً.", 26, 58),
    ("Devanagari", "फ़ाइल अनुमत आकार से बड़ी है। कृपया छोटी फ़ाइल चुनें या बाद में फिर से प्रयास करें।", 25, 88),
    ("Bengali", "ফাইলটি অনুমোদিত আকারের চেয়ে বড়। অনুগ্রহ করে একটি ছোট ফাইল বেছে নিন অথবা পরে আবার চেষ্টা করুন।", 32, 123),
    ("Gurmukhi", "ਫਾਈਲ ਮਨਜ਼ੂਰ ਆਕਾਰ ਤੋਂ ਵੱਡੀ ਹੈ। ਕਿਰਪਾ ਕਰਕੇ ਛੋਟੀ ਫਾਈਲ ਚੁਣੋ ਜਾਂ ਬਾਅਦ ਵਿੱਚ ਦੁਬਾਰਾ ਕੋਸ਼ਿਸ਼ ਕਰੋ।", 46, 146),
    ("Gujarati", "ફાઇલ મંજૂર કદ કરતાં મોટી છે. કૃપા કરીને નાની ફાઇલ પસંદ કરો અથવા પછીથી ફરી પ્રયાસ કરો.", 27, 136),
    ("Oriya", "ଫାଇଲଟି ଅନୁମୋଦିତ ଆକାରଠାରୁ ବଡ଼। ଦୟାକରି ଏକ ଛୋଟ ଫାଇଲ ବାଛନ୍ତୁ କିମ୍ବା ପରେ ପୁଣି ଚେଷ୍ଟା କରନ୍ତୁ।", 86, 220),
    ("Tamil", "கோப்பு அனுமதிக்கப்பட்ட அளவை விட பெரியது. தயவுசெய்து சிறிய கோப்பைத் தேர்ந்தெடுக்கவும் அல்லது பின்னர் மீண்டும் முயற்சிக்கவும்.", 41, 164),
    ("Telugu", "ఫైల్ అనుమతించిన పరిమాణం కంటే పెద్దది. దయచేసి చిన్న ఫైల్‌ను ఎంచుకోండి లేదా తర్వాత మళ్లీ ప్రయత్నించండి.", 39, 175),
    ("Kannada", "ಫೈಲ್ ಅನುಮತಿಸಿದ ಗಾತ್ರಕ್ಕಿಂತ ದೊಡ್ಡದಾಗಿದೆ. ದಯವಿಟ್ಟು ಚಿಕ್ಕ ಫೈಲ್ ಆಯ್ಕೆಮಾಡಿ ಅಥವಾ ನಂತರ ಮತ್ತೆ ಪ್ರಯತ್ನಿಸಿ.", 36, 170),
    ("Malayalam", "ഫയൽ അനുവദനീയമായ വലുപ്പത്തേക്കാൾ വലുതാണ്. ദയവായി ചെറിയ ഫയൽ തിരഞ്ഞെടുക്കുക അല്ലെങ്കിൽ പിന്നീട് വീണ്ടും ശ്രമിക്കുക.", 36, 187),
    ("Sinhala", "ගොනුව අවසර ලත් ප්‍රමාණයට වඩා විශාලයි. කරුණාකර කුඩා ගොනුවක් තෝරන්න හෝ පසුව නැවත උත්සාහ කරන්න.", 50, 165),
    ("Thai", "ไฟล์มีขนาดใหญ่กว่าที่อนุญาต กรุณาเลือกไฟล์ที่เล็กกว่าหรือลองใหม่อีกครั้งในภายหลัง", 36, 79),
    ("Lao", "ໄຟລ໌ມີຂະໜາດໃຫຍ່ກວ່າທີ່ອະນຸຍາດ. ກະລຸນາເລືອກໄຟລ໌ທີ່ນ້ອຍກວ່າ ຫຼື ລອງໃໝ່ອີກຄັ້ງພາຍຫຼັງ.", 151, 177),
    ("Tibetan", "ཡིག་ཆ་འདི་ཆོག་མཆན་ཐོབ་པའི་ཚད་ལས་ཆེ། ཡིག་ཆ་ཆུང་བ་ཞིག་འདེམས་པའམ་རྗེས་སུ་ཡང་བསྐྱར་ཚོད་ལྟ་གནང་རོགས།", 140, 193),
    ("Myanmar", "ဖိုင်သည် ခွင့်ပြုထားသော အရွယ်အစားထက် ကြီးနေပါသည်။ ပိုသေးသော ဖိုင်ကို ရွေးပါ သို့မဟုတ် နောက်မှ ထပ်ကြိုးစားပါ။", 50, 209),
    ("Georgian", "ფაილი დასაშვებ ზომაზე დიდია. გთხოვთ, აირჩიოთ უფრო პატარა ფაილი ან სცადოთ მოგვიანებით.", 32, 156),
    ("Ethiopic", "ፋይሉ ከተፈቀደው መጠን በላይ ነው። እባክዎ ትንሽ ፋይል ይምረጡ ወይም ቆይተው እንደገና ይሞክሩ።", 110, 146),
    ("Khmer", "ឯកសារមានទំហំធំជាងការអនុញ្ញាត។ សូមជ្រើសរើសឯកសារតូចជាងនេះ ឬព្យាយាមម្តងទៀតនៅពេលក្រោយ។", 53, 134),
]


@pytest.mark.parametrize(("script", "text", "o200k", "cl100k"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_script_estimate_is_near_the_real_count(script: str, text: str, o200k: int, cl100k: int) -> None:
    assert script in SCRIPTS
    # The estimator's accuracy bar: an undercount of a quarter at most, an overcount of a third.
    assert 0.75 <= estimate_tokens(text, O200K) / o200k <= 1.35
    assert 0.75 <= estimate_tokens(text, CL100K) / cl100k <= 1.35


# Scripts costed as before: (name, sample, o200k estimate, cl100k estimate), as the estimator gave them
# before the per-script costs existed.
UNCHANGED = [
    ("Russian", "Размер файла превышает допустимый. Пожалуйста, выберите файл меньшего размера или повторите попытку позже.", 28, 47),
    ("Ukrainian", "Розмір файлу перевищує допустимий. Будь ласка, виберіть менший файл або спробуйте пізніше.", 25, 41),
    ("French", "Le fichier dépasse la taille autorisée. Veuillez choisir un fichier plus petit ou réessayer plus tard.", 20, 21),
    ("German", "Die Datei ist größer als erlaubt. Bitte wählen Sie eine kleinere Datei oder versuchen Sie es später erneut.", 22, 23),
    ("Vietnamese", "Tệp lớn hơn kích thước cho phép. Vui lòng chọn tệp nhỏ hơn hoặc thử lại sau.", 21, 24),
    ("Polish", "Plik jest większy niż dozwolony rozmiar. Wybierz mniejszy plik lub spróbuj ponownie później.", 17, 18),
    ("Turkish", "Dosya izin verilen boyuttan büyük. Lütfen daha küçük bir dosya seçin veya daha sonra tekrar deneyin.", 20, 22),
    ("Chinese", "文件大小超过了允许的最大值。请选择较小的文件，或者稍后再试。", 21, 31),
    ("Japanese", "ファイルのサイズが上限を超えています。小さいファイルを選ぶか、後でもう一度お試しください。", 30, 45),
    ("Korean", "파일 크기가 허용된 최대값을 초과합니다. 더 작은 파일을 선택하거나 나중에 다시 시도하세요.", 43, 61),
]


@pytest.mark.parametrize(("name", "text", "o200k", "cl100k"), UNCHANGED, ids=[s[0] for s in UNCHANGED])
def test_latin_cyrillic_and_cjk_estimates_are_unchanged(name: str, text: str, o200k: int, cl100k: int) -> None:
    assert (estimate_tokens(text, O200K), estimate_tokens(text, CL100K)) == (o200k, cl100k)


def test_script_letters_are_counted_apart_from_other_letters() -> None:
    features = text_features("Ελλάδα, Größe, ệ")
    greek = SCRIPTS.index("Greek")
    assert features.scripts[greek] == 6 == sum(features.scripts)
    # ö, ß and the Vietnamese ệ (U+1EC7, next to the Ethiopic and Khmer ranges) stay other letters.
    assert features.other_letters == 3
    assert text_features("Größe").scripts == ()


def test_a_profile_without_script_costs_prices_them_as_other_letters() -> None:
    text = "ፋይሉ ትንሽ ነው"
    ethiopic = SCRIPTS.index("Ethiopic")
    features = text_features(text)
    assert (features.pretokens, features.scripts[ethiopic], features.other_letters) == (3, 8, 0)
    plain = msgspec.structs.replace(CL100K, scripts=())
    assert estimate_tokens(text, plain) == round(3 + 8 * CL100K.other_letter) == 6
    assert estimate_tokens(text, CL100K) == round(3 + 8 * CL100K.scripts[ethiopic]) == 25
