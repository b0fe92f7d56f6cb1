"""The summary's Goal says what is asked when it comes last, and only then.

Two known cases (r63): a long paste, then the question about it ("Why does this fail?"), kept the paste's first
400 characters; SWE-agent's demonstration and task, sent as two user messages before any answer, kept the
demonstration's. An earlier attempt joined every pre-answer message and every closing question to the Goal; the
r62 review's realistic inputs (REVIEW_CASES) caught it making seven kinds of wrong Goal, and the r63 review's
(R63_CASES) the first version of these rules more, and the second r63 review's (R63_2_CASES) the narrowed ones: each
keeps the Goal it had before (exact, not always a good one: what these rules leave alone).
"""

from __future__ import annotations

import pytest

from aiden.events import SessionEvent
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import SummaryRequest

U = "user_input"
A = "assistant_output"
TC = "tool_call"
TR = "tool_result"
S = "system_event"
_ANSWER = (A, "Let me look at the repository first.")


def _goal(*events: tuple[str, str]) -> str:
    """The Goal of ``events`` (an answer appended): the history record's, which the session summary's
    Goal line says too."""
    numbered = tuple(SessionEvent(type=t, content=c, seq=n) for n, (t, c) in enumerate((*events, _ANSWER), 1))
    summarizer = ExtractiveSummarizer()
    structured = summarizer.summarize_sync(SummaryRequest(purpose="history", events=numbered)).structured
    assert structured is not None
    request = SummaryRequest(purpose="session_summary", events=numbered, max_tokens=800)
    text = summarizer.summarize_sync(request).text
    goal_lines = [line.removeprefix("- Goal: ") for line in text.splitlines() if line.startswith("- Goal: ")]
    assert goal_lines == ([structured.user_goal] if structured.user_goal else [])
    return structured.user_goal


# pytest output, pasted: none of its lines reads as a pasted line, so all of it is prose to the summarizer, but its
# FAILED lines are error lines: what stands above a closing ask is mostly not prose.
_PYTEST = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.4, pytest-8.0.0, pluggy-1.4.0\ncollected 20 items\n"
    + "\n".join(
        f"FAILED tests/test_models.py::test_roundtrip_{i} - AssertionError: assert 'bob' == 'alice' for user {i}"
        for i in range(8)
    )
    + "\n========================= 8 failed, 12 passed in 0.84s ========================="
)
# The Goal's opening when the log opens the message: its first 400 characters, or fewer before an ask.
_LOG_OPENING = (
    "============================= test session starts ============================== platform linux -- "
    "Python 3.11.4, pytest-8.0.0, pluggy-1.4.0 collected 20 items FAILED tests/test_models.py::test_roundtrip_0 "
    "- AssertionError: assert 'bob' == 'alice' for user 0 FAILED tests/test_models.py::test_roundtrip_1 - "
    "AssertionError: assert 'bob' == 'alice' for user 1 FAILED"
)


def test_a_pasted_log_then_its_question_gives_the_question_in_the_goal() -> None:
    # Old code: the log's first 400 characters, f"{_LOG_OPENING}…", the question not in them.
    assert _goal((U, f"{_PYTEST}\n\nWhy does this fail?")) == f"{_LOG_OPENING} … Why does this fail?"
    assert _goal((U, f"Getting this after the upgrade:\n{_PYTEST}\nWhat's wrong here?")) == (
        "Getting this after the upgrade: ============================= test session starts "
        "============================== platform linux -- Python 3.11.4, pytest-8.0.0, pluggy-1.4.0 collected "
        "20 items FAILED tests/test_models.py::test_roundtrip_0 - AssertionError: assert 'bob' == 'alice' for "
        "user 0 FAILED tests/test_models.py::test_roundtrip_1 - AssertionError: assert 'bob' == … What's wrong here?"
    )


def test_a_closing_line_that_is_not_the_users_ask_leaves_the_opening() -> None:
    # Nothing asked; the paste's own question (it points at nothing above) or [y/N] prompt; the message
    # asked first (a closing question is then a follow-up): the opening, as before.
    assert _goal((U, _PYTEST)) == f"{_LOG_OPENING}…"
    assert _goal((U, f"{_PYTEST}\nCan you make it on Thursday at 3pm?")) == f"{_LOG_OPENING}…"
    assert _goal((U, f"{_PYTEST}\nRerun these failed tests? [y/N]")) == f"{_LOG_OPENING}…"
    assert _goal((U, f"{_PYTEST}\nStage this hunk [y,n,q,a,d,e,s,?]?")) == f"{_LOG_OPENING}…"
    # A tool's own prompt after its output, however it points back; a named chat participant's question.
    assert _goal((U, f"{_PYTEST}\nDo you want to perform these actions?")) == f"{_LOG_OPENING}…"
    assert _goal((U, f"{_PYTEST}\nAre you sure you want to rerun these?")) == f"{_LOG_OPENING}…"
    assert _goal((U, f"Dev: {_PYTEST}\nCan you fix this?")) == f"Dev: {_LOG_OPENING}…"
    ask = "Please fix the failing tests, they broke after the upgrade:"
    assert _goal((U, f"{ask}\n{_PYTEST}\nWhy does this fail?")) == _goal((U, f"{ask}\n{_PYTEST}"))
    assert _goal((U, f"{ask}\n{_PYTEST}")).startswith(f"{ask} =====")


_TEMPLATE = "We're currently solving the following issue within our repository. Here's the issue text:"
_DEMO = (
    "Here is a demonstration of how to correctly accomplish this task.\n--- DEMONSTRATION ---\n"
    f"{_TEMPLATE}\nISSUE:\nTimeDelta serialization precision\n"
    + "\n".join(f"Step {i}: the demonstration opens fields.py and reruns reproduce.py." for i in range(30))
    + "\n--- END OF DEMONSTRATION ---\n"
)
_ISSUE = (
    f"{_TEMPLATE}\nISSUE:\nPixel Representation attribute should be optional for pixel data handler\n"
    "INSTRUCTIONS:\nNow, you're going to solve this issue on your own. Edit all the files you need to and run "
    "any checks or tests that you want. When you're satisfied with all of the changes you've made, submit them.\n"
)
_DEMO_GOAL = (
    "Here is a demonstration of how to correctly accomplish this task. --- DEMONSTRATION --- We're currently "
    "solving the following issue within our repository. Here's the issue text: ISSUE: TimeDelta serialization "
    "precision Step 0: the demonstration opens fields.py and reruns reproduce.py. Step 1: the demonstration opens "
    "fields.py and reruns reproduce.py. Step 2: the demonstration opens fields.py and…"
)


def test_a_demonstration_then_the_task_in_two_messages_gives_the_task() -> None:
    # SWE-agent (pydicom-1458, test-repo-i1). Old code: the demonstration's Goal, _DEMO_GOAL.
    assert _goal((U, _DEMO), (U, _ISSUE)) == (
        "Here is a demonstration of how to correctly accomplish this task. … We're currently solving the "
        "following issue within our repository. Here's the issue text: ISSUE: Pixel Representation attribute "
        "should be optional for pixel data handler INSTRUCTIONS: Now, you're going to solve this issue on your "
        "own. Edit all the files you need to and run any checks or tests that you want. When you're satisfied…"
    )


def test_a_message_after_a_demonstration_is_the_task_only_if_it_restates_the_template() -> None:
    assert _goal((U, _DEMO)) == _DEMO_GOAL
    # After an answer or a tool call, or not restating the demonstration's template: the demonstration's Goal.
    assert _goal((U, _DEMO), _ANSWER, (U, _ISSUE)) == _DEMO_GOAL
    assert _goal((U, _DEMO), (TC, "ls"), (U, _ISSUE)) == _DEMO_GOAL
    assert _goal((U, _DEMO), (U, "Why does the demonstration rerun reproduce.py?")) == _DEMO_GOAL


# The r62 review's inputs (/work/notes/hunts/r62-review/goal/cases1..5.py).
LOG = "\n".join(
    f"2024-05-01 12:00:{i:02d} INFO worker-{i} processed batch {i} of the nightly import job, 500 rows written to staging"
    for i in range(8)
)
DOC = "# Design doc: caching layer\n\n" + "\n".join(
    f"The cache layer section {i} explains how entries are evicted after the configured TTL and how misses fall back "
    "to the database."
    for i in range(6)
)
CTX = (
    "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much "
    "luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. "
)
REQ = "Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. "
TB = "\n".join(
    f"Query {i} took 35 ms: SELECT customer.name FROM customer WHERE customer.id = {i} and the ORM issued it once "
    "per order row"
    for i in range(6)
)
LONG_ALSO = (
    "Also, when you're done, could you please write a short summary of what you changed and why, so that I can "
    "paste it into the pull request description for the reviewers on my team?"
)
MIG = "\n".join(
    f"Applying shop.{i:04d}_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... OK" for i in range(1, 7)
)
ENV = (
    "<environment_details>\n# VSCode Visible Files\nsrc/auth/login.py\n# VSCode Open Tabs\n"
    "src/auth/login.py, src/auth/session.py, tests/test_login.py\n"
    "# Current Time\n5/3/2024, 10:00:00 AM (Europe/Berlin)\n# Current Working Directory (/home/dev/shop) Files\n"
    "README.md\npyproject.toml\nsrc/\ntests/\n# Current Mode\n"
    "ACT MODE: the assistant may edit files and run commands in the terminal now\n</environment_details>"
)
TASK = (
    "Fix the login bug where users with an apostrophe in their email address get a 500 error on the sign-in page "
    "of the shop."
)
NOTES = [
    "Remember that the staging database password rotates every Monday at 9am.",
    "The release freeze starts on June 14 and lasts two weeks.",
    "Sam owns the billing service; ask him before changing the invoice schema.",
    "Our Kubernetes cluster runs version 1.28 on GKE in europe-west1.",
    "The on-call rotation switches every Wednesday at noon Berlin time.",
    "Customer Acme Corp has a custom SLA of 99.95 percent uptime.",
    "Please remind me to renew the TLS certificate for shop.example.com before July 1.",
]
ANS = (A, "Sure, let me look into that.")
REVIEW_CASES: dict[str, list[tuple[str, str]]] = {
    # r62-review cases1.py
    "hi_then_weather": [(U, "hi"), (U, "what's the weather in Paris tomorrow?"), ANS],
    "greeting_then_task": [(U, "Hello there!"), (U, "Please refactor the payment module to use the new Stripe client."), ANS],
    "greeting_sentence_then_task": [(U, "Hi, hope you're doing well today."), (U, "Please refactor the payment module to use the new Stripe client."), ANS],
    "task_then_thanks": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "thanks!"), ANS],
    "task_then_thanks_long": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Thanks a lot, I really appreciate your help with this."), ANS],
    "task_then_also": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Also, can you update the README afterwards?"), ANS],
    "task_then_also_stmt": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Also, the tests live in tests/payments."), ANS],
    "task_then_unrelated_q": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "By the way, what's the weather like in Paris?"), ANS],
    "two_unrelated_q": [(U, "What's the capital of Australia?"), (U, "How tall is Mount Everest?"), ANS],
    "q_then_never_mind": [(U, "What's the capital of Australia?"), (U, "Never mind, how tall is Mount Everest?"), ANS],
    "task_then_wait_actually": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Wait, actually refactor the billing module instead."), ANS],
    "task_then_scratch": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Scratch that, just fix the failing test in tests/test_billing.py."), ANS],
    "task_then_instead": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Actually, let's do the billing module instead."), ANS],
    "task_then_dont": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Don't touch the legacy adapter though."), ANS],
    "task_then_use_py38": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Make sure it still works on Python 3.8."), ANS],
    "task_then_go": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Go ahead."), ANS],
    "task_then_start_now": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "You can start now."), ANS],
    "task_then_hurry": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Are you there?"), ANS],
    "task_then_ping": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "hello??"), ANS],
    "task_then_status": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "Any progress?"), ANS],
    "task_then_typo": [(U, "Please refactor the payment module to use the new Stirpe client."), (U, "*Stripe"), ANS],
    "task_then_file": [(U, "Please refactor the payment module to use the new Stripe client."), (U, "src/payments/client.py"), ANS],
    "log_continue": [(U, "Getting this when I run the migration:\n" + LOG + "\nContinue? [y/N]"), ANS],
    "log_are_you_sure": [(U, "Running the cleanup script prints this:\n" + LOG + "\nAre you sure you want to delete 42 files?"), ANS],
    "log_shell_prompt": [(U, "Here is what happens:\n" + LOG + "\n$ "), ANS],
    "log_shell_prompt2": [(U, "Here is what happens:\n" + LOG + "\nuser@host:~/proj$ make test"), ANS],
    "doc_questions": [(U, "Please review this design doc and point out problems.\n" + DOC + "\n\nQuestions?"), ANS],
    "doc_heading": [(U, "Please review this design doc and point out problems.\n" + DOC + "\n\n## Open questions"), ANS],
    "doc_any_thoughts": [(U, "Please review this design doc and point out problems.\n" + DOC + "\n\nAny thoughts?"), ANS],
    "doc_ends_faq": [(U, "Please review this design doc and point out problems.\n" + DOC + "\n\nWhy not use Redis? Because the ops team doesn't support it."), ANS],
    "doc_ends_signoff": [(U, "Please review this design doc and point out problems.\n" + DOC + "\n\nLet me know what you think!"), ANS],
    "doc_ends_thanks_q": [(U, "Please review this design doc and point out problems.\n" + DOC + "\n\nThanks, can you?"), ANS],
    "code_todo": [(U, "Please optimize the importer, it is far too slow on large inputs and times out in production.\n" + LOG + "\n# TODO: fix?"), ANS],
    "doc_ends_q_in_doc": [(U, "Summarize this article for me.\n" + DOC + "\n\nSo what should engineers do?"), ANS],
    "email_paste": [(U, "Reply to this email politely declining the meeting.\n" + "\n".join(f"Dear team, paragraph {i} of the quarterly planning notes describes budgets and hiring plans for the coming year." for i in range(5)) + "\n\nCan you make it on Thursday at 3pm?"), ANS],
    "email_paste_first_task": [(U, "Draft a reply to this email saying we'll send the contract next week.\n" + "\n".join(f"Hello, paragraph {i} of the client's message repeats details on delivery schedules and invoices for the project." for i in range(5)) + "\n\nCould you please confirm by Friday?"), ANS],
    # r62-review cases2.py
    "long_task_then_also_long": [(U, CTX + REQ + "\n" + TB), (U, LONG_ALSO), ANS],
    "long_task_then_also_short": [(U, CTX + REQ + "\n" + TB), (U, "Also, can you update the changelog?"), ANS],
    "long_task_then_status": [(U, CTX + REQ + "\n" + TB), (U, "Any update on this?"), ANS],
    "long_task_then_tests_stmt": [(U, CTX + REQ + "\n" + TB), (U, "The tests for it are in shop/tests/test_orders.py."), ANS],
    "long_task_does_that_make_sense": [(U, CTX + REQ + "\n" + TB + "\nDoes that make sense?"), ANS],
    "long_task_is_that_clear": [(U, CTX + REQ + "\n" + TB + "\nIs that clear enough?"), ANS],
    "long_task_can_you_help": [(U, CTX + REQ + "\n" + TB + "\nCan you help?"), ANS],
    "long_task_need_more_info": [(U, CTX + REQ + "\n" + TB + "\nDo you need more info?"), ANS],
    "long_task_ps_q": [(U, CTX + REQ + "\n" + TB + "\nPS: how do I enable the SQL logging in Django settings again?"), ANS],
    "long_task_sys_between": [(U, CTX + REQ + "\n" + TB), (S, "Today is 3 May 2024."), (U, "Any update on this?"), ANS],
    "long_task_three_msgs": [(U, CTX), (U, REQ), (U, TB), ANS],
    "three_msgs_task_mid": [(U, "Here is some context: our shop backend uses Django 4.2 with Postgres 15 and Celery workers for emails."), (U, REQ), (U, "Thanks in advance, you're a lifesaver!"), ANS],
    "task_then_answer_to_own_q": [(U, "Please fix the failing CI on the main branch."), (U, "The log is at https://ci.example.com/run/123."), ANS],
    "task_then_sorry": [(U, "Please fix the failing CI on the main branch."), (U, "Sorry, I meant the release branch."), ANS],
    "task_then_oops": [(U, "Please fix the failing CI on the main branch."), (U, "Oops, wrong repo, it's the frontend one."), ANS],
    "task_then_ignore": [(U, "Please fix the failing CI on the main branch."), (U, "Ignore my previous message, please fix the docs build."), ANS],
    "task_then_cancel": [(U, "Please fix the failing CI on the main branch."), (U, "Cancel that, it's fixed already. Please update the docs instead."), ANS],
    "task_then_newtask": [(U, "Please fix the failing CI on the main branch."), (U, "Please fix the docs build instead."), ANS],
    "task_then_hmm": [(U, "Please fix the failing CI on the main branch."), (U, "Hmm, on second thought, fix the docs build first."), ANS],
    "task_then_never_mind": [(U, "Please fix the failing CI on the main branch."), (U, "Never mind, I'll do it myself. Can you write the release notes?"), ANS],
    "de_two": [(U, "Bitte behebe den Fehler im Login-Formular."), (U, "Ach ja, und schreib auch einen Test dafür."), ANS],
    "de_then_wait": [(U, "Bitte behebe den Fehler im Login-Formular."), (U, "Nein warte, es geht um das Registrierungsformular."), ANS],
    "zh_two": [(U, "请修复登录页面的错误。"), (U, "另外，你现在有空吗？"), ANS],  # noqa: RUF001 (the Chinese comma and question mark)
    "fr_then_correction": [(U, "Corrige le bug dans le formulaire de connexion."), (U, "Non, en fait c'est le formulaire d'inscription."), ANS],
    "es_then_correction": [(U, "Arregla el error en el formulario de inicio de sesión."), (U, "Perdón, me equivoqué: es el formulario de registro."), ANS],
    "tool_between": [(U, "Please fix the failing CI on the main branch."), (TC, "git status"), (U, "Also update the changelog."), ANS],
    "screen_between": [(U, "Please fix the failing CI on the main branch."), ("screen_context", "Browser: GitHub Actions run #123 failed"), (U, "What does this screen say?"), ANS],
    # r62-review cases3.py
    "migration_continue": [(U, "The deploy hangs at this step, what should I answer?\n" + MIG + "\nContinue? [y/N]"), ANS],
    "migration_then_task": [(U, "Please make the deploy script non-interactive, it hangs at this prompt:\n" + MIG + "\nThis will drop column legacy_total. Continue? [y/N]"), ANS],
    "cli_are_you_sure": [(U, "Automate our cleanup job so that it runs nightly from cron without asking anything. It currently prints:\n" + MIG + "\nAre you sure you want to delete 1,204 stale sessions?"), ANS],
    "task_then_env": [(U, TASK), (U, ENV), ANS],
    "env_then_task": [(U, ENV), (U, TASK), ANS],
    "long_task_then_env": [(U, TASK + " " + TASK.replace("Fix", "Also check") + " " + TASK.replace("Fix", "Then verify")), (U, ENV), ANS],
    "readme_paste_faq": [(U, "Translate this README section into Spanish:\n" + "\n".join(f"Step {i}: run the installer, choose the default options, and restart the terminal so that the PATH changes apply." for i in range(4)) + "\n\nWhy does the installer need admin rights?"), ANS],
    "issue_paste_with_q": [(U, "Triage this GitHub issue and label it.\n" + "\n".join(f"Line {i} of the issue: after upgrading to 2.3 the exporter writes empty CSV files when the dataset has more than 10k rows." for i in range(4)) + "\n\nIs there a workaround?"), ANS],
    # r62-review cases4.py
    "user_only_notes": [(U, n) for n in NOTES],
    "notes_then_answer": [(U, n) for n in NOTES] + [ANS],
    "two_unrelated_tasks": [(U, "Remind me to call mom at 5pm."), (U, "What's the weather tomorrow in Berlin?"), ANS],
    "task_next_day_no_answer": [(U, "Fix the flaky test in tests/test_sync.py."), (U, "Can you draft the quarterly report for the board meeting?"), ANS],
    # r62-review cases5.py
    "task_correction_then_more": [(U, "Fix the failing CI on the main branch."), (U, "No wait, I meant the release branch."), (U, "And please add a regression test for it."), ANS],
    "task_decision_then_ref": [(U, "Update the install docs for the new release."), (U, "I decided to drop Python 3.7 support."), (U, "Can you mention that in the changelog too?"), ANS],
    "task_rule_then_more": [(U, "Refactor the parser module."), (U, "Never use global state."), (U, "Then run the benchmarks."), ANS],
}
# Their Goals before the change, and after it.
REVIEW_GOALS: dict[str, str] = {
    'hi_then_weather': '',
    'greeting_then_task': 'Please refactor the payment module to use the new Stripe client.',
    'greeting_sentence_then_task': "Hi, hope you're doing well today.",
    'task_then_thanks': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_thanks_long': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_also': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_also_stmt': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_unrelated_q': 'Please refactor the payment module to use the new Stripe client.',
    'two_unrelated_q': '',
    'q_then_never_mind': '',
    'task_then_wait_actually': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_scratch': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_instead': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_dont': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_use_py38': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_go': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_start_now': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_hurry': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_ping': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_status': 'Please refactor the payment module to use the new Stripe client.',
    'task_then_typo': 'Please refactor the payment module to use the new Stirpe client.',
    'task_then_file': 'Please refactor the payment module to use the new Stripe client.',
    'log_continue': 'Getting this when I run the migration: Continue?',
    'log_are_you_sure': 'Running the cleanup script prints this: Are you sure you want to delete 42 files?',
    'log_shell_prompt': 'Here is what happens:',
    'log_shell_prompt2': 'Here is what happens:',
    'doc_questions': 'Please review this design doc and point out problems. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after…',
    'doc_heading': 'Please review this design doc and point out problems. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after…',
    'doc_any_thoughts': 'Please review this design doc and point out problems. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after…',
    'doc_ends_faq': 'Please review this design doc and point out problems. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after…',
    'doc_ends_signoff': 'Please review this design doc and point out problems. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after…',
    'doc_ends_thanks_q': 'Please review this design doc and point out problems. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after…',
    'code_todo': 'Please optimize the importer, it is far too slow on large inputs and times out in production. # TODO: fix?',
    'doc_ends_q_in_doc': 'Summarize this article for me. # Design doc: caching layer The cache layer section 0 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 1 explains how entries are evicted after the configured TTL and how misses fall back to the database. The cache layer section 2 explains how entries are evicted after the configured TTL and…',
    'email_paste': 'Reply to this email politely declining the meeting. Dear team, paragraph 0 of the quarterly planning notes describes budgets and hiring plans for the coming year. Dear team, paragraph 1 of the quarterly planning notes describes budgets and hiring plans for the coming year. Dear team, paragraph 2 of the quarterly planning notes describes budgets and hiring plans for the coming year. Dear team…',
    'email_paste_first_task': "Draft a reply to this email saying we'll send the contract next week. Hello, paragraph 0 of the client's message repeats details on delivery schedules and invoices for the project. Hello, paragraph 1 of the client's message repeats details on delivery schedules and invoices for the project. Hello, paragraph 2 of the client's message repeats details on delivery schedules and invoices for the…",
    'long_task_then_also_long': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_then_also_short': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_then_status': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_then_tests_stmt': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_does_that_make_sense': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_is_that_clear': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_can_you_help': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_need_more_info': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_ps_q': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_sys_between': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Query 0 took 35 ms: SELECT customer.name FROM customer WHERE customer.id = 0…",
    'long_task_three_msgs': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic.",
    'three_msgs_task_mid': 'Here is some context: our shop backend uses Django 4.2 with Postgres 15 and Celery workers for emails.',
    'task_then_answer_to_own_q': 'Please fix the failing CI on the main branch.',
    'task_then_sorry': 'Please fix the failing CI on the main branch.',
    'task_then_oops': 'Please fix the failing CI on the main branch.',
    'task_then_ignore': 'Please fix the failing CI on the main branch.',
    'task_then_cancel': 'Please fix the failing CI on the main branch.',
    'task_then_newtask': 'Please fix the failing CI on the main branch.',
    'task_then_hmm': 'Please fix the failing CI on the main branch.',
    'task_then_never_mind': 'Please fix the failing CI on the main branch.',
    'de_two': 'Bitte behebe den Fehler im Login-Formular.',
    'de_then_wait': 'Bitte behebe den Fehler im Login-Formular.',
    'zh_two': '请修复登录页面的错误。',
    'fr_then_correction': 'Corrige le bug dans le formulaire de connexion.',
    'es_then_correction': '',
    'tool_between': 'Please fix the failing CI on the main branch.',
    'screen_between': 'Please fix the failing CI on the main branch.',
    'migration_continue': '',
    'migration_then_task': 'Please make the deploy script non-interactive, it hangs at this prompt: Applying shop.0001_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... Applying shop.0002_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... Applying shop.0003_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... Applying…',
    'cli_are_you_sure': 'Automate our cleanup job so that it runs nightly from cron without asking anything. It currently prints: Applying shop.0001_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... Applying shop.0002_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... Applying shop.0003_add_customer_index_and_backfill_the_order_totals_for_legacy_rows... Applying…',
    'task_then_env': 'Fix the login bug where users with an apostrophe in their email address get a 500 error on the sign-in page of the shop.',
    'env_then_task': '<environment_details> # VSCode Visible Files src/auth/login.py # VSCode Open Tabs src/auth/login.py, src/auth/session.py, tests/test_login.py # Current Time 5/3/2024, 10:00:00 AM (Europe/Berlin) # Current Working Directory (/home/dev/shop) Files README.md pyproject.toml src/ tests/ # Current Mode ACT MODE: the assistant may edit files and run commands in the terminal now </environment_details>',
    'long_task_then_env': 'Fix the login bug where users with an apostrophe in their email address get a 500 error on the sign-in page of the shop. Also check the login bug where users with an apostrophe in their email address get a 500 error on the sign-in page of the shop. Then verify the login bug where users with an apostrophe in their email address get a 500 error on the sign-in page of the shop.',
    'readme_paste_faq': 'Translate this README section into Spanish: Step 0: run the installer, choose the default options, and restart the terminal so that the PATH changes apply. Step 1: run the installer, choose the default options, and restart the terminal so that the PATH changes apply. Step 2: run the installer, choose the default options, and restart the terminal so that the PATH changes apply. Step 3: run the…',
    'issue_paste_with_q': 'Triage this GitHub issue and label it. Line 0 of the issue: after upgrading to 2.3 the exporter writes empty CSV files when the dataset has more than 10k rows. Line 1 of the issue: after upgrading to 2.3 the exporter writes empty CSV files when the dataset has more than 10k rows. Line 2 of the issue: after upgrading to 2.3 the exporter writes empty CSV files when the dataset has more than 10k…',
    'user_only_notes': 'Remember that the staging database password rotates every Monday at 9am.',
    'notes_then_answer': 'Remember that the staging database password rotates every Monday at 9am.',
    'two_unrelated_tasks': 'Remind me to call mom at 5pm.',
    'task_next_day_no_answer': 'Fix the flaky test in tests/test_sync.py.',
    'task_correction_then_more': 'Fix the failing CI on the main branch.',
    'task_decision_then_ref': 'Update the install docs for the new release.',
    'task_rule_then_more': 'Refactor the parser module.',
}


@pytest.mark.parametrize("name", list(REVIEW_CASES))
def test_the_review_cases_keep_their_goal(name: str) -> None:
    assert _goal(*REVIEW_CASES[name]) == REVIEW_GOALS[name]


# The r63 review's inputs (/work/notes/hunts/r63/review-goal/cases1..3.py) that the first version of these rules
# changed for the worse or for no better: a pasted spec's, email's, issue's, reviewer's or tool's own closing
# question, a chat story's question, a named speaker; a second message that resends or quotes the first, repeats
# its error line, resumes it (Cline), follows a second demonstration or corrects a task. Each keeps its Goal
# from before these rules (exact, not always a good one).
_SPEC = "\n".join(
    f"Section {i}: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests "
    "with 429 when it is empty."
    for i in range(5)
)
_EMAIL = (
    "Hi Dana,\nThanks for sending over the Q3 invoice. Our finance team noticed that the line items for the support "
    "plan were billed twice, once in July and once in August, and the total is 4,800 EUR higher than the contract "
    "says.\n"
)
_TF = (
    "Terraform used the selected providers to generate the following execution plan. Resource actions are indicated "
    "with the following symbols:\n  ~ update in-place\n  - destroy\n"
    + "\n".join(
        f"The aws_instance web_{i} will be destroyed because its launch template changed and it cannot be updated in "
        "place."
        for i in range(3)
    )
    + "\nPlan: 0 to add, 1 to change, 3 to destroy.\nDo you want to perform these actions?"
)
_ISSUE_TEXT = (
    "The CSV exporter writes empty files when the dataset has more than 10k rows.\n"
    "Steps to reproduce: create a dataset with 20k rows, click Export, open the downloaded file: only the header row "
    "is there.\nThis started after upgrading from 2.2 to 2.3, and downgrading fixes it; the server log shows no error "
    "at all.\nI looked at exporter.py and the chunked writer seems to close the file before the last chunk is "
    "flushed.\nAm I missing something here?"
)
_STEPS = "\n".join(f"Step {i}: the demonstration opens fields.py and reruns reproduce.py." for i in range(30))
_INSTRUCTIONS = _ISSUE[_ISSUE.index("INSTRUCTIONS:") :]
_CTX = CTX.rstrip() + "\n"
_TASK_LINES = (
    _CTX + "Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries.\n"
    "Keep the public API of the orders app unchanged.\nAdd a regression test that counts the queries with "
    "assertNumQueries.\nDo not touch the legacy invoice views, they are being rewritten by another team.\n"
)
_ERR = (
    "django.db.utils.OperationalError: server closed the connection unexpectedly while running the order list query"
)
_ENV = ENV.replace("src/auth/login.py, src/auth/session.py, tests/test_login.py", "src/orders/views.py, src/orders/tests.py")
_ENV = _ENV.replace("src/auth/login.py", "src/orders/views.py")
_REMINDER = (
    "<system-reminder>\nAs you answer the user's questions, you can use the following context:\n# claudeMd\n"
    "Codebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These "
    "instructions OVERRIDE any default behavior and you MUST follow them exactly as written.\n"
    "Contents of /home/dev/shop/CLAUDE.md (project instructions, checked into the codebase):\n"
    "Always run the test suite with make test before you say that a change is done.\n"
    "Use type hints everywhere and keep functions shorter than fifty lines.\n</system-reminder>\n"
)
_FIX_N1 = "Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries."
R63_CASES: dict[str, list[tuple[str, str]]] = {
    # rule 1: a long message's closing ask
    "need_spec_make_sense": [(U, "We need to implement the rate limiter described in the spec below for the public API gateway.\n" + _SPEC + "\nDoes this make sense?")],
    "ctx_need_spec_q": [(U, CTX + "We need to make the order list endpoint issue a constant number of queries.\n" + _SPEC + "\nDoes that make sense?")],
    "spec_faq_q": [(U, "We need to implement the rate limiter described in the spec below.\n" + _SPEC + "\nOpen question from the spec authors: should we also count requests that fail validation here?")],
    "email_paste_own_q": [(U, "Got this email from a customer this morning and I'm not sure how to respond.\n" + _EMAIL + "We'd like to settle this before the end of the month, since our books close on the 30th.\nCould you look into this and send a corrected invoice by Friday?")],
    "email_paste_own_q_thanks": [(U, "Got this email from a customer this morning and I'm not sure how to respond.\n" + _EMAIL + "We'd like to settle this before the end of the month, since our books close on the 30th.\nCould you look into this and send a corrected invoice by Friday?\nThanks for this!")],
    "terraform_prompt": [(U, "Running terraform apply on prod shows this plan.\n" + _TF)],
    "issue_paste_own_q": [(U, _ISSUE_TEXT)],
    "issue_task_first_stmt": [(U, "The task is to fix the bug in this issue.\n" + _ISSUE_TEXT)],
    "issue_then_thanks": [(U, _ISSUE_TEXT + "\nThanks for this!")],
    "review_reviewer_q_then_thoughts": [(U, "My reviewer left this comment on the session cache PR, I don't agree with it.\n" + _SPEC + "\nReviewer: Can we drop this lock entirely?\nThoughts on this?")],
    "task_at_edge_paste_q": [(U, CTX + "What we need is the order list endpoint to issue a constant number of queries, not one per order row.\n" + _SPEC + "\nIs this documented anywhere?")],
    "named_long_story_q": [(U, "Caroline: " + " ".join(f"Last weekend I went hiking with my sister near the lake number {i} and we saw so many birds." for i in range(6)) + "\nWhat do you think about that?"), (U, "Melanie: That sounds lovely!")],
    "plain_long_story_q": [(U, " ".join(f"Last weekend I went hiking with my sister near the lake number {i} and we saw so many birds." for i in range(6)) + "\nWhat do you think about that?")],
    "claude_code_prompt": [(U, "Claude Code stopped with this, I'm not sure what to pick.\n" + "\n".join(f"Step {i}: the assistant rewrote the settings loader and moved the environment parsing into a helper module." for i in range(4)) + "\nDo you want to make this edit to settings.py?")],
    # rule 2: the second message as the task after a demonstration
    "swe_two_demos_task": [(U, _DEMO), (U, _DEMO.replace("Here is a", "Here is another").replace("TimeDelta serialization precision", "Docs build fails on Sphinx 7")), (U, _ISSUE)],
    "swe_task_then_fix": [(U, _ISSUE + _STEPS), (U, f"Sorry, wrong issue above.\n{_TEMPLATE}\nISSUE:\nRLE decoder crashes on odd-length segments\n{_INSTRUCTIONS}")],
    "swe_demo_task_named": [(U, _DEMO), (U, "Bob: " + _ISSUE)],
    "long_task_resent": [(U, _TASK_LINES), (U, _TASK_LINES)],
    "long_task_resent_edit": [(U, _TASK_LINES), (U, _TASK_LINES.replace("assertNumQueries", "django-assert-num-queries"))],
    "long_task_quote_line": [(U, _TASK_LINES), (U, "About this line:\nKeep the public API of the orders app unchanged.\nDoes that include the serializers?")],
    "err_task_same_error_again": [(U, _CTX + "Please fix the order list endpoint, it also crashes now and then with this:\n" + _ERR + "\nIt happens about once an hour in production.\n"), (U, "Just got it again after the restart:\n" + _ERR + "\nso it's not the connection pool warm-up.")],
    "cline_resumption": [(U, "<task>\nFix the N+1 query in OrderListView so that the endpoint issues a constant number of queries.\n</task>\n" + _ENV), (U, "[TASK RESUMPTION] This task was interrupted just now. It may or may not be complete, so please reassess the task context. Be aware that the project state may have changed since then. The current working directory is now '/home/dev/shop'.\nNew instructions for task continuation:\n<user_message>\nalso keep the public API unchanged\n</user_message>\n" + _ENV)],
    "claude_code_reminder_twice_direct": [(U, _REMINDER + "Fix the N+1 query in OrderListView."), (U, _REMINDER + "Actually first make the flaky test in tests/test_sync.py pass.")],
    "ctx_task_email_longq": [(U, _CTX + "We need a polite reply that admits the double billing and promises the fix.\n" + _EMAIL + "Could you look into this and send us a corrected invoice for the support plan, with the duplicated July line removed, by Friday the 27th at the latest?")],
    "task_then_long_paste_with_task_line": [(U, _FIX_N1), (U, _CTX * 2 + _FIX_N1 + "\nHere is the profile output from yesterday.")],
    "task_first_resent": [(U, _FIX_N1 + "\n" + _SPEC), (U, _FIX_N1 + "\n" + _SPEC)],
}
R63_GOALS: dict[str, str] = {
    'need_spec_make_sense': 'We need to implement the rate limiter described in the spec below for the public API gateway. Section 0: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 1: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 2: the rate limiter keeps a…',
    'ctx_need_spec_q': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. We need to make the order list endpoint issue a constant number of queries. Section 0: the rate limiter keeps a token bucket per API key, refills it every second and rejects…",
    'spec_faq_q': 'We need to implement the rate limiter described in the spec below. Section 0: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 1: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 2: the rate limiter keeps a token bucket per API key…',
    'email_paste_own_q': "Got this email from a customer this morning and I'm not sure how to respond. Thanks for sending over the Q3 invoice. Our finance team noticed that the line items for the support plan were billed twice, once in July and once in August, and the total is 4,800 EUR higher than the contract says. We'd like to settle this before the end of the month, since our books close on the 30th. Could you look…",
    'email_paste_own_q_thanks': "Got this email from a customer this morning and I'm not sure how to respond. Thanks for sending over the Q3 invoice. Our finance team noticed that the line items for the support plan were billed twice, once in July and once in August, and the total is 4,800 EUR higher than the contract says. We'd like to settle this before the end of the month, since our books close on the 30th. Could you look…",
    'terraform_prompt': 'Running terraform apply on prod shows this plan. Terraform used the selected providers to generate the following execution plan. Resource actions are indicated with the following symbols: ~ update in-place destroy The aws_instance web_0 will be destroyed because its launch template changed and it cannot be updated in place. The aws_instance web_1 will be destroyed because its launch template…',
    'issue_paste_own_q': 'The CSV exporter writes empty files when the dataset has more than 10k rows. Steps to reproduce: create a dataset with 20k rows, click Export, open the downloaded file: only the header row is there. This started after upgrading from 2.2 to 2.3, and downgrading fixes it; the server log shows no error at all. I looked at exporter.py and the chunked writer seems to close the file before the last…',
    'issue_task_first_stmt': 'The task is to fix the bug in this issue. The CSV exporter writes empty files when the dataset has more than 10k rows. Steps to reproduce: create a dataset with 20k rows, click Export, open the downloaded file: only the header row is there. This started after upgrading from 2.2 to 2.3, and downgrading fixes it; the server log shows no error at all. I looked at exporter.py and the chunked writer…',
    'issue_then_thanks': 'The CSV exporter writes empty files when the dataset has more than 10k rows. Steps to reproduce: create a dataset with 20k rows, click Export, open the downloaded file: only the header row is there. This started after upgrading from 2.2 to 2.3, and downgrading fixes it; the server log shows no error at all. I looked at exporter.py and the chunked writer seems to close the file before the last…',
    'review_reviewer_q_then_thoughts': "My reviewer left this comment on the session cache PR, I don't agree with it. Section 0: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 1: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 2: the rate limiter keeps a token bucket per…",
    'task_at_edge_paste_q': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. What we need is the order list endpoint to issue a constant number of queries, not one per order row. Section 0: the rate limiter keeps a token bucket per API key, refills it…",
    'named_long_story_q': 'Caroline: Last weekend I went hiking with my sister near the lake number 0 and we saw so many birds. Last weekend I went hiking with my sister near the lake number 1 and we saw so many birds. Last weekend I went hiking with my sister near the lake number 2 and we saw so many birds. Last weekend I went hiking with my sister near the lake number 3 and we saw so many birds. Last weekend I went…',
    'plain_long_story_q': 'Last weekend I went hiking with my sister near the lake number 0 and we saw so many birds. Last weekend I went hiking with my sister near the lake number 1 and we saw so many birds. Last weekend I went hiking with my sister near the lake number 2 and we saw so many birds. Last weekend I went hiking with my sister near the lake number 3 and we saw so many birds. Last weekend I went hiking with my…',
    'claude_code_prompt': "Claude Code stopped with this, I'm not sure what to pick. Step 0: the assistant rewrote the settings loader and moved the environment parsing into a helper module. Step 1: the assistant rewrote the settings loader and moved the environment parsing into a helper module. Step 2: the assistant rewrote the settings loader and moved the environment parsing into a helper module. Step 3: the assistant…",
    'swe_two_demos_task': "Here is a demonstration of how to correctly accomplish this task. --- DEMONSTRATION --- We're currently solving the following issue within our repository. Here's the issue text: ISSUE: TimeDelta serialization precision Step 0: the demonstration opens fields.py and reruns reproduce.py. Step 1: the demonstration opens fields.py and reruns reproduce.py. Step 2: the demonstration opens fields.py and…",
    'swe_task_then_fix': "We're currently solving the following issue within our repository. Here's the issue text: ISSUE: Pixel Representation attribute should be optional for pixel data handler INSTRUCTIONS: Now, you're going to solve this issue on your own. Edit all the files you need to and run any checks or tests that you want. When you're satisfied with all of the changes you've made, submit them. Step 0: the…",
    'swe_demo_task_named': "Here is a demonstration of how to correctly accomplish this task. --- DEMONSTRATION --- We're currently solving the following issue within our repository. Here's the issue text: ISSUE: TimeDelta serialization precision Step 0: the demonstration opens fields.py and reruns reproduce.py. Step 1: the demonstration opens fields.py and reruns reproduce.py. Step 2: the demonstration opens fields.py and…",
    'long_task_resent': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Keep the public API of the orders app unchanged. Add a regression test that…",
    'long_task_resent_edit': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Keep the public API of the orders app unchanged. Add a regression test that…",
    'long_task_quote_line': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Keep the public API of the orders app unchanged. Add a regression test that…",
    'err_task_same_error_again': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. Please fix the order list endpoint, it also crashes now and then with this: django.db.utils.OperationalError: server closed the connection unexpectedly while running the order…",
    'cline_resumption': '<task> Fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. </task> <environment_details> # VSCode Visible Files src/orders/views.py # VSCode Open Tabs src/orders/views.py, src/orders/tests.py # Current Time 5/3/2024, 10:00:00 AM (Europe/Berlin) # Current Working Directory (/home/dev/shop) Files README.md pyproject.toml src/ tests/ # Current Mode ACT MODE…',
    'claude_code_reminder_twice_direct': "<system-reminder> As you answer the user's questions, you can use the following context: # claudeMd Codebase and user instructions are shown below. Be sure to adhere to these instructions. IMPORTANT: These instructions OVERRIDE any default behavior and you MUST follow them exactly as written. Contents of /home/dev/shop/CLAUDE.md (project instructions, checked into the codebase): Always run the…",
    'ctx_task_email_longq': "I'm working on our Django shop backend and I have been debugging the order pages for two days now without much luck, the production dashboards show the order list endpoint taking more than four seconds at peak traffic. We need a polite reply that admits the double billing and promises the fix. Thanks for sending over the Q3 invoice. Our finance team noticed that the line items for the support…",
    'task_then_long_paste_with_task_line': 'Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries.',
    'task_first_resent': 'Please fix the N+1 query in OrderListView so that the endpoint issues a constant number of queries. Section 0: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 1: the rate limiter keeps a token bucket per API key, refills it every second and rejects requests with 429 when it is empty. Section 2: the rate limiter…',
}


@pytest.mark.parametrize("name", list(R63_CASES))
def test_the_r63_review_cases_keep_their_goal(name: str) -> None:
    assert _goal(*R63_CASES[name]) == R63_GOALS[name]


# The second r63 review's worse cases (/work/notes/hunts/r63/review-goal2/cases1..3.py): a tool's or script's own
# question after its output, an ask whose room would cut the task the Goal showed, and first messages that are no
# demonstration (254 to 384 characters of prose) whose next message opens with one of their lines.
_HUNK = (
    "diff --git a/billing/invoice.py b/billing/invoice.py\nindex 3f2a1c4..9b7e2d1 100644\n--- a/billing/invoice.py\n"
    "+++ b/billing/invoice.py\n@@ -12,7 +12,9 @@ class InvoiceService:\n     def __init__(self, repo):\n"
    "         self.repo = repo\n+        self.cache = {}\n+        self.tax = TaxTable.load()\n"
    "     def total(self, invoice):\n-        return sum(l.amount for l in invoice.lines)\n"
    "+        return self.tax.apply(sum(l.amount for l in invoice.lines))\n"
)
_SPLIT = (
    "I'm splitting my refactor of the invoice module into two commits, one that only adds the tax table and one that "
    "changes how totals are computed, because the reviewers on the billing team asked for smaller commits after the "
    "last incident where a big refactor hid a rounding bug for three weeks before anyone noticed it in the reports. "
    "git add -p shows this hunk that mixes both changes:\n"
)
_BRANCHES = "\n".join(
    f"2024-05-03 10:00:{i:02d} INFO cleanup: branch feature/ticket-{1200 + i} merged into main {400 - i} days ago"
    for i in range(12)
)
_CLEANUP = (
    "Our cleanup script for stale git branches in the monorepo lists far too many branches, it is supposed to pick only "
    "the ones merged into main more than thirty days ago and leave the release branches and anything with an open pull "
    "request alone, but today it also offered to delete the branches of two pull requests that are still in review, "
    "which would have lost a week of work. Output from this morning's run:\n"
)
_MEDIA = (
    "Our media cleanup script is about to delete product images that are still used by the archived catalogue, it only "
    "checks the live products table and not the archive, and last time it ran it removed the photos of two hundred "
    "archived products that customer support still links to from old order confirmations. Output:\n"
    "Scanning /srv/media for files not referenced by any product...\n"
    + "\n".join(
        f"2024-05-03 09:12:{i:02d} INFO orphan: /srv/media/products/{9000 + i}/image_large.jpg (2.4 MB)" for i in range(10)
    )
    + "\nFound 10 orphaned files, 24 MB in total.\nIs this the right directory?"
)
_SLOW = (
    "The order list endpoint of the shop backend has been slow for weeks now, the production dashboards show more than "
    "four seconds at peak traffic, the platform team traced it to the view that lists the orders with their customers "
    "and line items, and the new query-count tests from the performance epic fail on main since the Friday release went "
    "out. Turn these failures into one bug report for the platform team.\n"
    + "\n".join(
        f"FAILED tests/test_orders.py::test_list_{i} - AssertionError: assert 57 == 3 queries for page {i}"
        for i in range(10)
    )
    + "\nCould you also explain why these tests count 57 queries when the view only selects the orders, their customers "
    "and their line items here?"
)
_BUILD = "Build failed on main for the following commit:\n"
_CI = (
    f"Forwarding the CI alerts from this morning.\n{_BUILD}a41c9e2 Switch the invoice exporter to streaming writes (Priya)\n"
    "Job: test-py311, step: pytest, 14 failed, 812 passed\n"
    "FAILED tests/test_export.py::test_large_dataset - AssertionError: expected 20000 rows, got 1\n"
    "Find out which change broke the exporter tests and fix it, the release is tomorrow."
)
_CI_AGAIN = (
    f"{_BUILD}b77d0f3 Bump psycopg to 3.2 (dependabot)\nJob: test-py312, step: pytest, 2 failed, 824 passed\n"
    "FAILED tests/test_db.py::test_pool_reuse - OperationalError: connection already closed"
)
_STABLE = "The migration must keep the invoice IDs stable.\n"
_BUG = "Bug report (mobile app, build 4.12.0, template v2):\n"
_WORKED = "Yesterday I worked on the following items:\n"
R63_2_CASES: dict[str, list[tuple[str, str]]] = {
    "git_add_p_stage_this_hunk": [(U, f"{_SPLIT}{_HUNK}Stage this hunk [y,n,q,a,d,e,s,?]?")],
    "cleanup_script_delete_these": [(U, f"{_CLEANUP}{_BRANCHES}\nDelete these 12 branches? ")],
    "ci_alert_then_second_alert": [(U, _CI), (U, _CI_AGAIN)],
    "ci_alert_then_second_alert_sys_between": [(U, _CI), (S, "Webhook delivery retried"), (U, _CI_AGAIN)],
    "task_then_quote_line_clarify": [
        (
            U,
            "We're migrating the billing service from MySQL 5.7 to Postgres 16 over the next two weeks.\n"
            f"{_STABLE}Write the migration script for the invoices and payments tables, and a rollback plan we can run "
            "within ten minutes.",
        ),
        (
            U,
            f"{_STABLE}To be clear: stable means the same integers, not just unique ones, because the accounting "
            "exports reference them.",
        ),
    ],
    "two_bug_reports_same_template": [
        (
            U,
            f"Two reports came in from QA on the mobile app today.\n{_BUG}Steps: open an order from the push "
            "notification while the app is in the background.\nExpected: the order detail screen.\n"
            "Actual: a blank screen, the app has to be restarted.\nFix these before the 4.12.1 hotfix goes out on Friday.",
        ),
        (
            U,
            f"{_BUG}Steps: switch the language to German in the settings.\nExpected: the checkout button reads Zur "
            "Kasse.\nActual: the button label is cut off after four letters.",
        ),
    ],
    "standup_then_addition": [
        (
            U,
            f"Standup notes from the billing team for this week.\n{_WORKED}- the invoice exporter streaming fix\n"
            "- the Postgres migration dry run\n- reviewing the tax table pull request\n"
            "Turn these into a short status email for the engineering manager.",
        ),
        (U, f"{_WORKED}- also the on-call handover for the payments team"),
    ],
    "media_script_own_question": [(U, _MEDIA)],
    "ctx_task_2nd_sentence_then_long_ask": [(U, _SLOW)],
}
R63_2_GOALS: dict[str, str] = {
    'git_add_p_stage_this_hunk': "I'm splitting my refactor of the invoice module into two commits, one that only adds the tax table and one that changes how totals are computed, because the reviewers on the billing team asked for smaller commits after the last incident where a big refactor hid a rounding bug for three weeks before anyone noticed it in the reports. git add -p shows this hunk that mixes both changes: Stage this…",
    'cleanup_script_delete_these': 'Our cleanup script for stale git branches in the monorepo lists far too many branches, it is supposed to pick only the ones merged into main more than thirty days ago and leave the release branches and anything with an open pull request alone, but today it also offered to delete the branches of two pull requests that are still in review, which would have lost a week of work. Output from this…',
    'ci_alert_then_second_alert': 'Forwarding the CI alerts from this morning. Build failed on main for the following commit: a41c9e2 Switch the invoice exporter to streaming writes (Priya) Job: test-py311, step: pytest, 14 failed, 812 passed FAILED tests/test_export.py::test_large_dataset - AssertionError: expected 20000 rows, got 1 Find out which change broke the exporter tests and fix it, the release is tomorrow.',
    'ci_alert_then_second_alert_sys_between': 'Forwarding the CI alerts from this morning. Build failed on main for the following commit: a41c9e2 Switch the invoice exporter to streaming writes (Priya) Job: test-py311, step: pytest, 14 failed, 812 passed FAILED tests/test_export.py::test_large_dataset - AssertionError: expected 20000 rows, got 1 Find out which change broke the exporter tests and fix it, the release is tomorrow.',
    'task_then_quote_line_clarify': "We're migrating the billing service from MySQL 5.7 to Postgres 16 over the next two weeks. The migration must keep the invoice IDs stable. Write the migration script for the invoices and payments tables, and a rollback plan we can run within ten minutes.",
    'two_bug_reports_same_template': 'Two reports came in from QA on the mobile app today. Bug report (mobile app, build 4.12.0, template v2): Steps: open an order from the push notification while the app is in the background. Expected: the order detail screen. Actual: a blank screen, the app has to be restarted. Fix these before the 4.12.1 hotfix goes out on Friday.',
    'standup_then_addition': 'Standup notes from the billing team for this week. Yesterday I worked on the following items: the invoice exporter streaming fix the Postgres migration dry run reviewing the tax table pull request Turn these into a short status email for the engineering manager.',
    'media_script_own_question': 'Our media cleanup script is about to delete product images that are still used by the archived catalogue, it only checks the live products table and not the archive, and last time it ran it removed the photos of two hundred archived products that customer support still links to from old order confirmations. Output: Scanning /srv/media for files not referenced by any product... Found 10 orphaned…',
    'ctx_task_2nd_sentence_then_long_ask': 'The order list endpoint of the shop backend has been slow for weeks now, the production dashboards show more than four seconds at peak traffic, the platform team traced it to the view that lists the orders with their customers and line items, and the new query-count tests from the performance epic fail on main since the Friday release went out. Turn these failures into one bug report for the…',
}


@pytest.mark.parametrize("name", list(R63_2_CASES))
def test_the_second_r63_review_cases_keep_their_goal(name: str) -> None:
    assert _goal(*R63_2_CASES[name]) == R63_2_GOALS[name]
