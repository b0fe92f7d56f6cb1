"""strip_screenshot_data / scrub_text: payloads go, metadata and normal text stay."""

from __future__ import annotations

import base64
import hashlib
import json

from aiden.events import SessionEvent
from aiden.policy.scrub import scrub_text, strip_screenshot_data

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 2).decode()
JPEG = base64.b64encode(b"\xff\xd8\xff\xe0" + bytes(300)).decode()
URI = f"data:image/png;base64,{PNG}"


def tool_result(content: str, **kw: object) -> SessionEvent:
    return SessionEvent(type="tool_result", role="tool", content=content, **kw)  # type: ignore[arg-type]


def test_screenshot_json_keeps_metadata_and_drops_the_payload() -> None:
    content = json.dumps(
        {
            "width": 1280,
            "height": 800,
            "format": "png",
            "size": 48213,
            "action_output": "clicked Save",
            "data": PNG,
        }
    )
    scrubbed = strip_screenshot_data(tool_result(content))
    assert json.loads(scrubbed.content) == {
        "width": 1280,
        "height": 800,
        "format": "png",
        "size": 48213,
        "action_output": "clicked Save",
        "data_omitted_bytes": len(PNG),
    }


def test_nested_and_listed_payloads() -> None:
    content = json.dumps(
        [
            {"type": "text", "text": "screen captured"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
            {"type": "image_url", "image_url": {"url": URI, "detail": "low"}},
            {"Image": URI, "b64_json": JPEG, "caption": "two"},
        ]
    )
    scrubbed = json.loads(strip_screenshot_data(tool_result(content)).content)
    assert scrubbed == [
        {"type": "text", "text": "screen captured"},
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/png", "data_omitted_bytes": len(PNG)},
        },
        {
            "type": "image_url",
            "image_url": {"url": f"[image data omitted: {len(URI)} bytes]", "detail": "low"},
        },
        {"Image_omitted_bytes": len(URI), "b64_json_omitted_bytes": len(JPEG), "caption": "two"},
    ]


def test_wrapped_base64_is_a_payload_too() -> None:
    wrapped = "\n".join(PNG[i : i + 76] for i in range(0, len(PNG), 76))
    scrubbed = strip_screenshot_data(tool_result(json.dumps({"data": wrapped})))
    assert json.loads(scrubbed.content) == {"data_omitted_bytes": len(wrapped)}


def test_inline_data_uris_in_text() -> None:
    text = f"Took a screenshot: {URI} (1280x800)."
    expected = f"Took a screenshot: [image data omitted: {len(URI)} bytes] (1280x800)."
    assert scrub_text(text) == expected
    assert strip_screenshot_data(tool_result(text)).content == expected
    upper = f"see DATA:IMAGE/JPEG;BASE64,{JPEG}"
    assert scrub_text(upper) == f"see [image data omitted: {len(upper) - 4} bytes]"


def test_raw_base64_image_content() -> None:
    assert strip_screenshot_data(tool_result(PNG + "\n")).content == (
        f"[image data omitted: {len(PNG)} bytes]"
    )


def test_meta_values_are_scrubbed() -> None:
    event = tool_result(
        "ok",
        meta={
            "screenshot": PNG,
            "width": 10,
            7: "non-string key",
            "frames": [{"image": URI}, "note"],
            "log": f"saved {URI}",
        },
    )
    scrubbed = strip_screenshot_data(event)
    assert scrubbed.content == "ok"
    assert scrubbed.meta == {
        "screenshot_omitted_bytes": len(PNG),
        "width": 10,
        7: "non-string key",
        "frames": [{"image_omitted_bytes": len(URI)}, "note"],
        "log": f"saved [image data omitted: {len(URI)} bytes]",
    }


def test_nothing_to_scrub_returns_the_same_event() -> None:
    sha512 = hashlib.sha512(b"x").hexdigest()  # 128 hex characters: not an image
    long_text = "word " * 100
    for event in [
        tool_result(""),
        tool_result("plain answer with no images"),
        tool_result(json.dumps({"data": "short", "image": "https://example.com/a.png"})),
        tool_result(json.dumps({"data": sha512, "base64": long_text})),
        tool_result(json.dumps([1, 2, [3, {"data": None}]])),
        tool_result('{not json, but mentions "data": here}'),
        tool_result("[1, 2, 3]"),
        tool_result("mentions base64, but no uri"),
        tool_result(PNG[:100]),  # too short to be a screenshot
        tool_result("x", meta={"data": "short", "nested": {"k": [1, "v"]}}),
    ]:
        assert strip_screenshot_data(event) is event
    assert scrub_text("plain") == "plain"


def test_scrubbing_twice_changes_nothing() -> None:
    event = tool_result(json.dumps({"data": PNG, "note": f"also {URI}"}), meta={"image": URI})
    once = strip_screenshot_data(event)
    assert once is not event
    assert strip_screenshot_data(once) is once
