"""Lines pasted into a user message (file views, code, terminal, package-manager, log and diff lines) are not
the user's rules; the user's own sentences of that message are (r61-G bug 2: a replay of SWE-agent's
pydicom-1458 showed "1548: self.value_field.only = self.only" and "Requirement already satisfied: ..." under
USER PREFERENCES in later sessions' PROJECT MEMORY). And a user input labelled "Goal: ..." is no
"Goal: Goal: ..." (r61-J)."""

from __future__ import annotations

from aiden.events import SessionEvent
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.summarizers.protocol import StructuredSummary, SummaryRequest
from tests.summarizers.sections import structured_of


def _session(user: str, answer: str = "I looked at the file.") -> StructuredSummary:
    return structured_of(user, answer)


# SWE-agent's demonstration quotes a file view and a pip run between the agent's turns.
_FILE_VIEW = """[File: /marshmallow-code__marshmallow/src/marshmallow/fields.py (1997 lines total)]
(1427 more lines above)
1427:        (de)serialization. Must be 'days', 'seconds', 'microseconds',
1432:        Always serializes to an integer value to avoid rounding errors.
1539:            self.only = self.value_field.only
1548:            self.value_field.only = self.only
(Open file: /marshmallow-code__marshmallow/src/marshmallow/fields.py)
(Current directory: /marshmallow-code__marshmallow)
bash-$
"""
_PIP = """Requirement already satisfied: identify>=1.0.0 in /root/miniconda3/lib/python3.9/site-packages (2.5.35)
Requirement already satisfied: pytest in /root/miniconda3/lib/python3.9/site-packages (8.1.1)
Successfully installed marshmallow-3.13.0
"""


def test_a_quoted_file_view_and_pip_output_set_no_preference_while_the_users_own_sentence_does() -> None:
    user = (
        "We're fixing the TimeDelta rounding in fields.py.\n"
        f"{_FILE_VIEW}{_PIP}"
        "Never push to the main branch.\n"
    )
    # Old code: USER PREFERENCES also held "Must be 'days', 'seconds', 'microseconds',", "1432: Always
    # serializes ...", "1539: self.only = ...", "1548: ..." and both "Requirement already satisfied" lines.
    assert _session(user).user_preferences == ("Never push to the main branch.",)


def test_unnumbered_code_diff_log_and_prompt_lines_set_no_rule_or_failed_approach() -> None:
    user = (
        "Here is what I ran:\n"
        "$ python -m pytest tests/test_export.py --only-failed\n"
        "2024-05-01 12:00:03 WARNING retries must not exceed max_retries, using only 3\n"
        "diff --git a/export.py b/export.py\n"
        "@@ -10,3 +10,3 @@\n"
        "-    limit = only_rows(max_rows)\n"
        "+    limit = only_rows(min_rows)\n"
        "    self.only = never_cached(self.value_field.only)\n"
        "if (rows.length > maxRows) {\n"
        "    // tried a row cache here but it did not help\n"
        "    return trimmed(rows);\n"
        "}\n"
        "Do not change the public API.\n"
    )
    structured = _session(user)
    # Old code: the prompt, the log line, both diff lines and the assignment were filed as preferences,
    # the code comment as a failed approach, "diff --git ..." and "if (rows.length > maxRows) {" as facts.
    assert structured.user_preferences == ("Do not change the public API.",)
    assert structured.failed_approaches == ()
    assert structured.facts == ("Key files: tests/test_export.py, a/export.py, b/export.py",)


def test_an_error_the_user_pastes_stays_an_error() -> None:
    events = (
        SessionEvent(type="user_input", seq=1, content="The import now fails:\nValueError: unknown precision 'weeks'\n"),
        SessionEvent(type="assistant_output", seq=2, content="Let me look."),
    )
    structured = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events)).structured
    assert structured is not None
    assert [e.error for e in structured.errors] == ["The import now fails:", "ValueError: unknown precision 'weeks'"]


def test_a_goal_labelled_goal_is_not_labelled_twice() -> None:
    structured = _session("Goal: migrate the billing service to Postgres 16.", answer="Let me look at the schema.")
    # Old code: "Goal: Goal: migrate the billing service to Postgres 16." (PROJECT MEMORY showed it so).
    assert structured.outcome.split(" Open: ")[0] == "Goal: migrate the billing service to Postgres 16."


def test_a_heading_before_pasted_errors_is_no_error_of_its_own() -> None:
    events = (
        SessionEvent(type="user_input", seq=1, content="The linter rejects my edit.\nERRORS:\n- E999 IndentationError: unexpected indent\n"),
        SessionEvent(type="assistant_output", seq=2, content="Let me look."),
    )
    structured = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="history", events=events)).structured
    assert structured is not None
    # Old code: "ERRORS:" was an error of its own (the demonstration SWE-agent quotes has it), once the
    # file views before it no longer filled the message's sentence budget.
    assert [e.error for e in structured.errors] == ["E999 IndentationError: unexpected indent"]


def test_a_users_own_assignment_shaped_dated_or_semicolon_ended_lines_are_their_rules() -> None:
    # r61-R finding 4: these lines go on in words; only code-shaped lines around them are pasted.
    user = (
        "Set up the worker service in worker/main.py.\n"
        "PORT=11311 always, never 8080.\n"
        "DATABASE_URL=postgres://db/prod must never be used in tests.\n"
        "max_retries = 3 at most, never more.\n"
        "2025-03-14 17:00 is the hard deadline.\n"
        "Never touch the migrations folder;\n"
        "    retries = only_max(3)\n"
        "return never_cached(rows);\n"
        "2025-03-14 16:59:58,120 worker.main must never retry\n"
    )
    assert _session(user).user_preferences == (
        "PORT=11311 always, never 8080.",
        "DATABASE_URL=postgres://db/prod must never be used in tests.",
        "max_retries = 3 at most, never more.",
        "2025-03-14 17:00 is the hard deadline.",
        "Never touch the migrations folder;",
    )


def test_a_message_made_only_of_pasted_lines_keeps_its_paths_and_commands() -> None:
    # r61-R finding 5: the message has no sentence of the user's, but its command and paths are kept.
    events = (
        SessionEvent(type="user_input", seq=1, content="Set up the worker service in worker/main.py."),
        SessionEvent(type="assistant_output", seq=2, content="I'll configure the worker."),
        SessionEvent(
            type="user_input",
            seq=3,
            content="$ python scripts/migrate.py --target /srv/app/db.sqlite\nimport worker.settings\n",
        ),
        SessionEvent(type="assistant_output", seq=4, content="Looking."),
    )
    structured = ExtractiveSummarizer().summarize_sync(SummaryRequest(purpose="session_summary", events=events)).structured
    assert structured is not None
    assert structured.working_recipes == ("$ python scripts/migrate.py --target /srv/app/db.sqlite",)
    assert structured.facts[-1] == "Key files: worker/main.py, scripts/migrate.py, /srv/app/db.sqlite"


def test_common_log_formats_and_code_valued_assignments_are_pasted_the_users_own_lines_are_not() -> None:
    # r61-R3 findings 3 and 7: Python logging's default format, PostgreSQL's prefix, Docker and GitHub
    # Actions lines, a timestamp with seconds then text, and assignments whose value is an expression went
    # under USER PREFERENCES; a person's dated line (no seconds) or assignment in words stays theirs.
    user = (
        "Find out why the worker stops in worker/main.py.\n"
        "2024-01-15 10:32:01,123 - myapp - INFO - workers must not exceed 4\n"
        "2024-01-15 10:32:01,123 - __main__ - WARNING - retries must stay under 3\n"
        "2024-01-15 10:32:01.123 UTC [1234] LOG:  connections must not exceed max_connections\n"
        "2024-01-15T10:32:01.1234567Z ##[warning]Node.js 16 actions are deprecated, you must update to Node 20\n"
        "2024-01-15T10:32:01.123456789Z Never exceed the 512m memory limit\n"
        "2024-01-15 10:32:01 Starting server on port 8080, max 100 connections\n"
        "deadline = friday if strict else monday\n"
        'deadline = os.getenv("DEADLINE") or friday\n'
        "checks = not required\n"
        "2025-03-14 17:00 is the hard deadline.\n"
        "2025-04-01 09:30 the freeze starts, never deploy after that.\n"
        "2025-05-02 18:00 UTC must be the cutover time.\n"
        "PORT=11311 always, never 8080.\n"
        "timeout = 30 seconds at most, never longer.\n"
        "max_workers = 4 must never be raised on the shared box.\n"
        "LOG_LEVEL = debug only in staging.\n"
        "retries = 3 is the limit, don't raise it.\n"
        "The worker must not run as root.\n"
        "Never exceed 4 workers on the shared box.\n"
        "Always restart the worker with systemctl, not by hand.\n"
    )
    assert _session(user).user_preferences == (
        "2025-03-14 17:00 is the hard deadline.",
        "2025-04-01 09:30 the freeze starts, never deploy after that.",
        "2025-05-02 18:00 UTC must be the cutover time.",
        "PORT=11311 always, never 8080.",
        "timeout = 30 seconds at most, never longer.",
        "max_workers = 4 must never be raised on the shared box.",
        "LOG_LEVEL = debug only in staging.",
        "retries = 3 is the limit, don't raise it.",
        "The worker must not run as root.",
        "Never exceed 4 workers on the shared box.",
        "Always restart the worker with systemctl, not by hand.",
    )


def test_a_users_setting_in_words_is_theirs_an_expression_valued_assignment_is_pasted() -> None:
    # r61-R4 finding 2: "3 or more", "30 if possible." and "2.0 or newer" read as code expressions, so the
    # user's own setting lines were dropped from what they wrote.
    settings = "retries = 3 or more\ntimeout = 30 if possible.\nversion = 2.0 or newer\nbudget = 100 or less\n"
    structured = _session("Set up the worker service in worker/main.py.\n" + settings)
    goal = (
        "Set up the worker service in worker/main.py. retries = 3 or more timeout = 30 if possible. "
        "version = 2.0 or newer budget = 100 or less"
    )
    assert structured.outcome == f"Goal: {goal} Open: User: {goal}"
    assert structured.user_preferences == ("budget = 100 or less",)
    code = (
        "n = 3 if prod else 5\n"
        "x = y and z\n"
        "enabled = not disabled\n"
        "mode = fast if cached else slow\n"
        "retries = retries or 3\n"
        "port = env.port or 8080\n"
        "ok = ready and not stale\n"
        "use_cache = not testing\n"
        "timeout = base.timeout if base else 30\n"
        "x = a if b else c if d else e\n"
        "debug = verbose and not quiet\n"
        "ratio = 1.5\n"
    )
    goal = "Set up the worker service in worker/main.py."
    assert _session(f"{goal}\n{code}").outcome == f"Goal: {goal} Open: User: {goal}"
