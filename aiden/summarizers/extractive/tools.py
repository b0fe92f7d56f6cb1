"""Reading tool calls and tool output: a call's description and paths, an output's error lines and finding.

A read-only call is never a step to redo (its file is under ``Files:``), and
output shaped like log records, code or file views is content looked at, not
a finding. Pure functions of one event; nothing here touches a collector.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Final, NamedTuple

import msgspec

from aiden.events import SessionEvent
from aiden.policy.shell import AMPERSAND, QUOTED, command_text, command_words, commands, program_words, script
from aiden.policy.summary_md import normalize
from aiden.policy.toolresult import NONZERO_EXIT, OS_REFUSAL
from aiden.summarizers.mustkeep.classify import is_strong_error_line, looks_like_error_line
from aiden.summarizers.mustkeep.text import arg_paths, clip, find_paths, key_tokens

# A tool whose name reads like one of these verbs, and none of the writing ones, only looks.
_READ_VERBS: Final = frozenset({
    "read", "view", "open", "cat", "show", "list", "ls", "search", "grep", "find", "glob",
    "locate", "stat", "head", "tail", "inspect", "goto", "scroll", "tree", "recall",
})  # fmt: skip
_WRITE_VERBS: Final = frozenset({
    "write", "edit", "create", "delete", "remove", "rm", "run", "exec", "execute", "apply",
    "patch", "replace", "insert", "move", "mv", "rename", "update", "set", "install",
    "commit", "push", "submit", "save", "append", "str", "make", "mkdir", "touch",
})  # fmt: skip
# Shell programs (and SWE-agent's file-viewer commands) that only print.
_READ_PROGRAMS: Final = frozenset({
    "cat", "head", "tail", "less", "more", "ls", "ll", "tree", "find", "grep", "egrep",
    "fgrep", "rg", "ag", "ack", "wc", "file", "stat", "du", "pwd", "which", "whereis", "cd",
    "nl", "open", "goto", "scroll_up", "scroll_down", "search_file", "search_dir", "find_file",
})  # fmt: skip
# ... and those that print a file's bytes or stored text (a step, not a file read): their output is a binary's
# words, a log's messages, a document's or a database's values.
_TEXT_PRINTERS: Final = _READ_PROGRAMS | {
    "strings", "xxd", "hexdump", "od", "readelf", "objdump", "nm", "journalctl", "jq", "yq", "sqlite3", "redis-cli",
    "sed", "awk", "bat", "zcat", "zless", "bzcat", "xzcat", "type", "Get-Content", "gc", "cut", "tr", "sort", "uniq",
    "column", "fold", "iconv", "gunzip", "zgrep", "Select-Object", "Select-String", "Out-String", "Where-Object",
}  # fmt: skip
_GIT_READS: Final = frozenset({"status", "log", "diff", "show", "blame", "ls-files", "grep"})
# A program's subcommands (its first words but options), as paths: "git log", "docker compose logs".
_READ_SUBCOMMANDS: Final[dict[str, frozenset[tuple[str, ...]]]] = {"git": frozenset((r,) for r in _GIT_READS)}
# ... and the subcommands that print what other programs logged (their words are no verdict of theirs)
_PRINTING_SUBCOMMANDS: Final = {
    **_READ_SUBCOMMANDS,
    **dict.fromkeys(("kubectl", "oc", "podman", "docker-compose"), frozenset({("logs",)})),
    "stern": frozenset({()}),  # prints pods' logs, whatever its arguments
    "docker": frozenset({("logs",), ("compose", "logs"), ("container", "logs")}),
    "aws": frozenset({("logs", "tail"), ("logs", "filter-log-events"), ("logs", "get-log-events")}),
}
_LOG_PROGRAMS: Final = frozenset({"kubectl", "oc", "podman", "docker", "docker-compose"})
_DAEMON_REFUSAL: Final = re.compile(r"^(?:[\w.-]+: )?Error (?:response from daemon|from server)\b|^no such service: ")
# Options that take the next word as their value, before a subcommand ("kubectl -n ci logs", "git -C repo log").
_SUBCOMMAND_VALUE_OPTIONS: Final = frozenset({
    "-C", "-c", "-n", "--namespace", "--context", "--cluster", "--kubeconfig", "-H", "--host", "--config", "-f",
    "--file", "-p", "--project-name", "--profile", "--env-file", "--git-dir", "--work-tree", "--region", "-l",
})  # fmt: skip
_SHELL_WRITES: Final = re.compile(r">|\s-(?:delete|exec|execdir|ok|fprint)\b")
# A program's own arguments that write a file: find's actions, tree's and sort's "-o x.txt" (journalctl's "-o" is a
# format; "ls -o" lists), git diff's (log's, show's) "--output=x.diff" (not "--output-indicator-new=")
_WRITING_ARGS: Final = {"find": re.compile(r"-(?:okdir|fprint0|fprintf|fls)"), "git": re.compile(r"--output(?:=.*)?"),
                        "tree": re.compile(r"-[A-Za-z]*o|--output(?:=.*)?"), "sort": re.compile(r"-[bdfghiMnRrVcCmsuz]*o.*|--output(?:=.*)?")}
_GIT_OUTPUTS: Final = frozenset({("diff",), ("log",), ("show",), ("format-patch",)})
_HARMLESS_REDIRECT: Final = re.compile(r"\d?>&\d|\d?>\s*/dev/null")
_NAME_WORDS: Final = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
_TOOL_LINE: Final = re.compile(r"^(?P<name>[\w.-]+)\((?P<args>.*)\)$", re.DOTALL)


def is_read_only_tool(name: str) -> bool:
    """True for a tool named like a reader (``read_file``, ``search``, ``listDir``), never for a writer."""
    words = {w.casefold() for w in _NAME_WORDS.findall(name)}
    return bool(words & _READ_VERBS) and not words & _WRITE_VERBS


def _only_runs(command: str, programs: frozenset[str], subcommands: dict[str, frozenset[tuple[str, ...]]]) -> bool:
    """True for a shell command whose every part runs one of ``programs`` (or one of ``subcommands``: a git
    read), writing nothing."""
    if _SHELL_WRITES.search(_HARMLESS_REDIRECT.sub(" ", QUOTED.sub("_", command))):
        return False
    parts = command_words(command)
    for words in parts:
        name = words[0].rsplit("/", 1)[-1]
        if name not in programs and not _runs_subcommand(words, subcommands.get(name, frozenset())):
            return False
        writes = _WRITING_ARGS.get(name)
        if writes and any(writes.fullmatch(w) for w in words[1:]) and (name != "git" or _runs_subcommand(words, _GIT_OUTPUTS)):
            return False
    return bool(parts)


def _runs_subcommand(words: list[str], paths: frozenset[tuple[str, ...]]) -> bool:
    """True when the program ``words[0]`` runs one of the subcommand ``paths`` (``()``: any, as ``stern``)."""
    if not paths:
        return False
    subcommands: list[str] = []
    rest = iter(words[1:])
    for word in rest:
        if word in _SUBCOMMAND_VALUE_OPTIONS:
            next(rest, None)
        elif not word.startswith("-"):
            subcommands.append(word)
    return any(tuple(subcommands[: len(path)]) == path for path in paths)


def is_read_only_command(line: str) -> bool:
    """True for a rendered ``Commands:`` line (``$ cmd`` or ``tool(args)``) that only reads."""
    if line.startswith("$ "):
        return _only_runs(script(line[2:]), _READ_PROGRAMS, _READ_SUBCOMMANDS)  # (as describe_call reads it)
    match = _TOOL_LINE.match(line)
    return match is not None and is_read_only_tool(match.group("name"))


# Output shaped like a log record below error level, code, a docstring or comment, a structured-data
# fragment or a numbered file-view line ("273:", "  12 | ...", cat -n) is content looked at, not a finding.
_VIEW_LINE: Final = re.compile(r"^\s*\d+(?::(?!\d)|\s*[|\u2502\t])")
_LOG_RECORD: Final = re.compile(
    r"^\s*(?:[\[(]?\d{4}-\d\d-\d\d(?:[T ][\d:.,]+\S*)?[\])]?\s+)?(?:[\[(]\s*)?"
    r"(?:TRACE|DEBUG|INFO|NOTICE|WARN|WARNING)\b"
)
_CODE_SHAPED: Final = re.compile(
    r"^\s*(?:\"\"\"|'''|#|//|/\*|\*|<!--|```)"  # docstrings, comments, fences
    r"|^\s*(?:def|class|import|from|return|raise|async|await|function|const|let|var|public|private|package)\b"
    r"|^\s*[\w.\[\]'\"]+\s*[:+\-*/]?=\s"  # assignments
    r"|^\s*\"[^\"]*\"\s*:"  # a JSON key (a search hit's "path": ...)
    r"|^\s*[\[{]"  # the start of structured data
    rf"|{_VIEW_LINE.pattern}"
    r"|^\[File: .*\]$"  # SWE-agent's file-view header
)


_NEGATED: Final = re.compile(
    r"(?i)\b(?:no|0|zero|without)\s+(?:errors?|failures?|exceptions?|problems?)\b|\b0 (?:failed|errors?)\b"
    r"|\berror[- ]free\b|\bsuccessfully\b"
)


def negates_error(text: str) -> bool:
    """True for text that mentions errors only to deny them ("completed successfully, no errors")."""
    return _NEGATED.search(text) is not None


TOOL_NOTE_CHARS: Final = 160  # a kept note: a tool result's line, a range's newest message
_ERROR_CHARS: Final = 200
_ERRORS_PER_RESULT: Final = 2
_SCAN_HEAD_LINES: Final = 4000
_SCAN_TAIL_LINES: Final = 1000

_EXCEPTION_LINE: Final = re.compile(r"^\s*(?:[A-Z]{1,4}\d{1,4}\s+)?(?:[\w.]+\.)?\w*(?:Error|Exception|Exit|Interrupt|Failure|Fault)\b(?::.*)?$")
# Shapes of a failure the shared error-line rules do not know: an ERROR/FATAL
# log record, a non-zero exit, make's "*** [target] Error 2", an OS refusal.
_EVIDENCE_LINE: Final = re.compile(
    r"\b(?:ERROR|FATAL|CRITICAL)\b"
    rf"|{NONZERO_EXIT}"
    r"|(?i:returned non-zero exit status)"
    r"|\*\*\* \[[^\]]*\] Error \d+"
    # The perror shape only: a refusal merely mentioned is weak evidence (looks_like_error_line).
    rf"|: {OS_REFUSAL}$"
)
# A compiler's diagnostic followed by the source line it quotes, as gcc and clang print it when they run
# ("a.c:3:5: error: ..." then "    3 | int x"): a diagnostic alone may be a fixture or log being read.
_COMPILER_ERROR: Final = re.compile(r"^[\w.][\w./-]*\.\w+:\d+:\d+: (?:fatal )?error: ")
_SOURCE_CONTEXT: Final = re.compile(r"^\s*\d+ \| ")
# A command's own verdict, when no line is an error line: where each tool prints it, at the end.
# A summary on one of the last lines (a hint, a timing or a list of what failed may follow it):
# The SWE-agent harness's, on the whole command: a time-out, a refused edit.
_HARNESS_VERDICT: Final = re.compile(r"^\[?(?:EXECUTION TIMED OUT|Command timed out)\b|^Your (?:changes|edits?) ha(?:ve|s) NOT been applied\b")
# go test's line of a failed package, whole (a bare "FAIL" may be a row of data): "FAIL\tpkg\t0.01s", "FAIL\tpkg [build failed]"
_GO_TEST_FAILED: Final = re.compile(r"^FAIL\t\S+(?:\t[\d.]+s| \[\w+ failed\])$")
_SUMMARY_VERDICT: Final = re.compile(
    # test runners' tallies with failures: pytest "1 failed, 2 passed in 0.1s", jest/vitest "Tests: 1 failed"
    # (or only errors: "4 passed, 1 error in 0.1s"), rspec "3 examples, 1 failure", ctest "67% tests passed,
    # 1 tests failed out of 3", go test "FAIL\tpkg 0.01s"
    r"^=*\s*(?:\d+ (?:passed|skipped|deselected|xfailed|xpassed|warnings?|rerun), )*[1-9]\d* (?:failed|errors?)"
    r"(?:, \d+ (?:passed|skipped|deselected|xfailed|xpassed|warnings?|errors?|rerun))* in [\d.]+s\b"
    r"|^Tests?(?: Suites| Files)?:?\s+[1-9]\d* failed\b"
    r"|^\d+ examples?, [1-9]\d* failures?\b|^\d+% tests passed, [1-9]\d* tests? failed\b"
    rf"|{_GO_TEST_FAILED.pattern}"
    r"|^Errors while running CTest$|^=*\s*no tests ran in [\d.]+s\b"
    # checkers' counts as they word them (not any script's "Found 3 errors in logs/x"): mypy "Found 2 errors
    # in 1 file (checked ...)", ruff "Found 2 errors." (not "(2 fixed, 0 remaining)"), tsc "Found 1 error in
    # a.ts:3" / "in the same file"; eslint's problems line, black, prettier
    r"|^Found [1-9]\d* errors?(?:\.$| in (?:\d+ files?\b|the same file\b|\S+:\d+$))"
    r"|^\u2716 \d+ problems? \([1-9]\d* errors?|^Oh no! \U0001f4a5|^\[warn\] Code style issues found\b"
    # make's fatal "***"
    r"|^g?make(?:\[\d+\])?: \*\*\* "
    # a command PowerShell does not know (its own wording)
    r"|^\S+ ?: The term '[^']+' is not recognized as (?:the|a) name of a cmdlet\b"
)


class _ToolVerdicts(NamedTuple):
    """A tool's own verdicts, read only from a command that runs it (a word of the command names it as a
    program: ``./gradlew build``, ``docker exec api dotnet test``): in what other commands print (a log read
    with ``docker exec ... cat``, ``tail``, ``curl``, ``tar -O``) the same lines are text."""

    names: re.Pattern[str]  # the program's names (matched whole, without a path or .exe)
    summary: re.Pattern[str] | None = None  # on one of the last lines (a tally, a closing word)
    final: re.Pattern[str] | None = None  # the last words (or before the tool's own epilogue)
    anywhere: re.Pattern[str] | None = None  # on any line, unstripped (its own indentation)
    framed: bool = False  # its diagnostics in a frame, "╷" then "│ Error: ..." (read in error_lines)
    passed: re.Pattern[str] | None = None  # its last line, the tally of a run that passed (what it got past is none)
    data: re.Pattern[str] | None = None  # a command whose output is data it prints (its lines are no verdict)


_TOOLS: Final = (
    # gradle "BUILD FAILED in 2s" (old gradle, ant: "BUILD FAILED")
    _ToolVerdicts(re.compile(r"gradlew?|ant"), re.compile(r"^BUILD FAILED(?: in \d.*)?$")),
    # MSBuild/dotnet "Build FAILED." and its indented tally "    1 Error(s)" (.NET 9: "Build failed with 1
    # error(s) in 2.1s"), dotnet test "Failed!  - Failed: 1, ..." / "Test Run Failed." (anywhere: tallies, files follow), its own errors
    # ("MSBUILD : error MSB1009: ...", "/app/App.csproj : error NU1101: ...", "Failed to restore ..."), and
    # .NET's report of an exception nothing caught ("Unhandled exception. System.IO.IOException: ...")
    _ToolVerdicts(
        re.compile(r"dotnet|msbuild"), re.compile(r"^Build FAILED\.$|^Build failed with [1-9]\d* error\(s\)"),
        re.compile(r"^\S+ : error [A-Z]+\d+: |^Failed to restore \S"),
        re.compile(r"^ {4}[1-9]\d* Error\(s\)$|^Unhandled [Ee]xception[.:] [\w.]+(?:Exception|Error)\b"
                   r"|^(?:Test run summary: )?Failed!\s+- |^Test Run Failed\.$"),
    ),
    # phpunit (pest) "FAILURES!" / "Tests: 3, Assertions: 3, Failures: 1."
    _ToolVerdicts(re.compile(r"phpunit|pest|php|composer|artisan"),
                  re.compile(r"^(?:FAILURES|ERRORS)!$|^Tests: \d+, Assertions: \d+(?:, \w+: \d+)*, (?:Errors|Failures): [1-9]")),
    # ansible's recap of a host that failed or was unreachable (a line a host), its ad-hoc "web1 | FAILED | rc=1 >>";
    # a recap of hosts that all passed overrides a task's "fatal: [web1]: FAILED!" it ignored or rescued
    _ToolVerdicts(re.compile(r"ansible(?:-playbook)?"),
                  (recap := re.compile(r"^\S+\s+: ok=\d+\s+changed=\d+\s+(?:unreachable=[1-9]|unreachable=\d+\s+failed=[1-9])")),
                  anywhere=re.compile(rf"^[\w.-]+ \| (?:FAILED|UNREACHABLE)!? (?:\||=>)|{recap.pattern}"),
                  passed=re.compile(r"^\S+\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0\b")),
    # systemctl's refusal (then its "See ..." epilogue)
    _ToolVerdicts(re.compile(r"systemctl|service"), final=re.compile(r"^Job for \S+ failed\b")),
    # the AWS CLI's ("fatal error: An error occurred (404) when calling the HeadObject operation: ...",
    # "upload failed: ...", no credentials, a waiter given up) ...
    _ToolVerdicts(re.compile(r"aws"), final=re.compile(
        r"^(?:fatal error: |(?:upload|download|copy|move|delete) failed: .*?)?An error occurred \([\w.]+\) when"
        r" calling the \w+ operation\b|^Unable to locate credentials\b|^Waiter \w+ failed: ")),
    # ... and no endpoint, arguments refused, cloudformation deploy's failure: unless it prints data ("--output
    # text", "aws s3 cp s3://b/log -"), whose lines may be a log's
    _ToolVerdicts(
        re.compile(r"aws"), re.compile(r"^Failed to create/update the stack\. "),
        re.compile(r"^(?:Could not connect to the|Connect timeout on) endpoint URL: "), re.compile(r"^Parameter validation failed:$"),
        data=re.compile(r"\s--output[=\s]+text\b|\bs3\s+cp\s(?:[^;&|\n]*\s)?-(?=\s|$|[;&|])"),
    ),
    # terraform's (and OpenTofu's): its framed "│ Error: ..."
    _ToolVerdicts(re.compile(r"terraform|tofu|terragrunt"), framed=True),
)
_PROGRAM_WORD: Final = re.compile(r"[^\s;&|()<>'\"`=]+")
# PowerShell's errors, read only from what PowerShell ran (a cmdlet, a .ps1, pwsh/powershell): Windows
# PowerShell's record is its message, then where it stood ("At line:1 char:1", "At C:\a.ps1:3 char:5"), then
# "+ " lines (the command quoted, its category; a native program's stderr wrapped: NativeCommandError);
# PowerShell 7's starts with the cmdlet's name ("Copy-Item: Cannot find path ...").
_POWERSHELL_PROGRAM: Final = re.compile(r"(?i:pwsh|powershell)(?i:\.exe)?|.*\.(?i:ps1)|[A-Z][a-z]+-[A-Z][A-Za-z]+")
_POWERSHELL_AT: Final = re.compile(r"^At (?:line|\S.*):\d+ char:\d+$")
_POWERSHELL_VERBS: Final = (
    "Add|Clear|Close|Compare|Complete|Compress|Confirm|Connect|Convert|ConvertFrom|ConvertTo|Copy|Debug|Disable|"
    "Disconnect|Dismount|Enable|Enter|Exit|Expand|Export|Find|ForEach|Format|Get|Group|Import|Initialize|Install|"
    "Invoke|Join|Measure|Mount|Move|New|Open|Out|Pop|Publish|Push|Read|Receive|Register|Remove|Rename|Reset|"
    "Resolve|Restart|Restore|Resume|Save|Search|Select|Send|Set|Show|Sort|Split|Start|Stop|Suspend|Test|Trace|"
    "Uninstall|Unregister|Update|Use|Wait|Where|Write"
)
_POWERSHELL_ERROR: Final = re.compile(rf"^(?:{_POWERSHELL_VERBS})-[A-Z][A-Za-z]+: \S")
# ... its message alone (a script's own "Get-Version: 1.4.2" is none) unless its "Line |" frame follows
_ERROR_WORDS: Final = re.compile(r"\b(?i:cannot|can't|could not|not found|does not|is not|denied|failed|failure|error|exception"
                                 r"|invalid|unable|refused|timed out|not recognized)\b")
_POWERSHELL_FRAME: Final = re.compile(r"^(?:Line |\d+ )?\|")
_SUMMARY_LINES: Final = 5
_VERDICT_CHARS: Final = 1000
# A refusal of the program that ran (a reader too): perror's "prog: [arg: ]why" with a missing file
# (strings' "No such file", file's "(No such file or directory)"), a shell's missing command (dash's "sh: 1:
# foo: not found", zsh's "zsh: command not found: foo").
_REFUSAL: Final = re.compile(
    r"^[^\s:]+: .*\bNo such (?:file(?: or directory)?|process)\)?$"
    r"|^[^\s:]+: (?:\d+: )?\S+: not found$|^[^\s:]+: command not found: \S+$"
)
# A program's last words (earlier ones are noise the command got past: a retry, sudo's warning):
_VERDICT: Final = re.compile(
    # an error code: "curl: (6) Could not resolve host: x"
    rf"^[\w.-]+: \(\d+\) \S|{_REFUSAL.pattern}"
    # ssh's "[user@host: ]Permission denied (publickey)."
    r"|^(?:\S+: )?Permission denied \([\w,-]+\)\.?$"
    # a host name that does not resolve (getaddrinfo's words): "ping: db: Name or service not known", ssh's
    # "ssh: Could not resolve hostname db: ..." (not sudo's own warning "sudo: unable to resolve host x: ...")
    r"|^[\w.-]+: (?:Could not resolve hostname )?[\w.-]+: "
    r"(?:Name or service not known|Temporary failure in name resolution|No address associated with hostname)$"
    # "prog: error: ..." (argparse, psql, clang), "prog: what failed[: why]" (gpg, nginx -t; no tally's
    # "3 failed"), npm 10's "npm error ...", apt's "E: Unable to ..." (a word, not a script's "E: -76.01"),
    # systemd's "Failed to start x: why"
    r"|^[\w.-]+: (?:fatal )?error: |^[\w.-]+: [^:\d]*\bfailed(?:: .*|\.)?$|^npm error |^E: [A-Z][a-z]"
    r"|^Failed to \w+ [^:]*: \S"
    # death by a signal, as the shell reports it: "Segmentation fault (core dumped)", bash's
    # "bash: line 1:  4242 Aborted  (core dumped) ./a.out"
    r"|^(?:\S+: line \d+: +\d+ )?(?:Segmentation fault|Aborted|Bus error|Illegal instruction|Killed|Terminated)"
    r"(?: +\(core dumped\))?(?: {2,}.*)?$"
    # a compiler's or linter's diagnostic closing the output: tsc "a.ts(3,5): error TS2322: ...", flake8
    # "a.py:1:1: F401 ..." (and go's "./main.go:5:2: undefined: foo" after its "# package" header, below)
    r"|^\S+\(\d+,\d+\): error TS\d+: |^\S+:\d+:\d+: [A-Z]{1,3}\d{3,4}\b"
    # a flag checker's refusal (a CTF's "Wrong flag!"); a program's own "Invalid input" may be a validation test
    r"|^(?i:wrong|incorrect|invalid) flag\b"
    # git's unresolved conflict, docker's and kubectl's refusals (a later step of the command may have
    # recovered: they count only when nothing but their own epilogue follows, below)
    r"|^CONFLICT \([^)]+\): |^Automatic merge failed;|^(?:[\w.-]+: )?Error (?:response from daemon|from server)\b"
    # git stash pop/apply's, printed only when the stash did not apply cleanly
    r"|^The stash entry is kept in case you need it again\.$"
    # Windows cmd's refusals (a command it does not know: then its epilogue)
    r"|^'[^']+' is not recognized as an internal or external command\b"
    r"|^The system cannot find the (?:path|file) specified\.$|^Access is denied\.$"
)
# ... and readers' own: jq's "jq: error (at <stdin>:0): ...", "jq: 1 compile error"; sed's, gawk's, mawk's on their
# script (not the source line gawk quotes: "awk: cmd. line:1: {print $1", then its "^ ..." line)
_READERS_ERROR: Final = re.compile(r"^jq: (?:error \(at [^)]*\): |parse error: |\d+ compile errors?$)|^sed: -e expression "
                                   r"#\d+, char \d+: |^[gm]?awk: (?:cmd\. line:|line )\d+: (?:\s*\^ |fatal: |syntax error\b|[A-Z][a-z]+ )")
_RAW_JQ: Final = re.compile(r"-[a-zA-Z]*[rj][a-zA-Z]*|--raw-output0?|--join-output")  # jq prints any text
_SED_IN_PLACE: Final = re.compile(r"-[nErsuz]*i.*|--in-place(?:=.*)?")  # sed prints nothing
# ... unless it says the command went on: a warning, a retry, a fallback.
_WENT_ON: Final = re.compile(r"(?i:warning|retry|retrying|fall(?:ing)? ?back)")
# What git and docker print after their refusal: it is still the last word.
_EPILOGUE: Final = re.compile(
    r"^See '[\w -]+--help'\.$|^hint: |^CONFLICT \(|^Automatic merge failed;"
    r"|^See (?:\"|system logs and ')systemctl (?:--user )?status |^operable program or batch file\.$"
)
_GO_DIAGNOSTIC: Final = re.compile(r"^\S+\.go:\d+:\d+: \S")
_GO_PACKAGE: Final = re.compile(r"^# \[?[\w./-]+\]?$")  # go build's "# pkg", go vet's "# [pkg]"
# go build -gcflags=-m's optimisation notes have the diagnostics' shape: no failure.
_GO_NOTE: Final = re.compile(r"\b(?:can inline|inlining call|escapes to heap|moved to heap|does not escape|leaking param)\b")
# A response's head as curl -i / -I prints it: a status line, header lines, a blank line (again after each
# redirect or "100 Continue"); then the body.
_HTTP_STATUS: Final = re.compile(r"^HTTP/[\d.]+ (\d{3})\b")
_HTTP_HEADER: Final = re.compile(r"^[\w-]+:")
_QUOTED_INDENT: Final = 4  # a summary indented this far is quoted (a commit message), not printed by the tool
# A command list whose later part runs whatever an earlier one did ("a; b", "a || b", "a & b"): its output's
# last words may be an earlier part's, got past. Separators inside quotes are no list's.
_LIST_SEPARATOR: Final = re.compile(rf"\|\||{AMPERSAND}|[;\n]")
_ERREXIT: Final = re.compile(r"(?:^|[;\n]\s*)set -(?:\w*e\w*\b|o errexit\b)")
# ... and what only shows something first (cat setup.cfg; pytest): its text is followed by the next part's.
_LEAD_PRINTERS: Final = _READ_PROGRAMS | {"echo", "printf", "date", "env"}
# ... of them, those that print a file's (a log's) text, whose lines a later tool's verdict must not take
_FILE_PRINTERS: Final = frozenset({
    "cat", "head", "tail", "less", "more", "bat", "nl", "zcat", "bzcat", "xzcat", "zless", "type", "Get-Content", "gc",
})  # fmt: skip
# ... or only prints a word after it (pytest; echo "exit=$?"): the last lines but one are still its.
_TRAILING_PRINTERS: Final = frozenset({"echo", "printf", "date"})
_SILENT_SETUP: Final = frozenset({"cd", "export", "source", ".", "set", "unset"})
_BULLET: Final = re.compile(r"^[-*\u2022]\s+")
# terraform's (and OpenTofu's) frame around a diagnostic: "╷", then "│ Error: ...", its lines, "╵"
_FRAME_OPEN: Final = "\u2577"
_FRAMED_ERROR: Final = "\u2502 Error: "
_GOT_PAST: Final = re.compile(r"^(?:fatal|failed): \[")  # ansible's failed task, maybe ignored or rescued
_JSON_KEY: Final = re.compile(r'^\s+"[^"]+": |^\}$')
_NOISE_LINE: Final = re.compile(r"^[\W_]+$")
_TRACEBACK_HEAD: Final = "traceback (most recent call last)"
FILE_LINE: Final = re.compile(r'^\s*File "([^"]+)", line \d+')


class Call(msgspec.Struct, frozen=True):
    """What a tool_call event asked for."""

    description: str  # "$ pytest -q" / "read_file(path=a.py)"
    shell: bool  # a shell command or code execution: its output is scanned like a command's
    paths: list[str]
    read_only: bool  # only reads: never a Commands line, its paths go under Files
    command: str = ""  # what ran, as error_lines takes it: "$ " and a shell command's whole text, or code run's description


def describe_call(event: SessionEvent) -> Call:
    """What a tool_call event asked for."""
    name = event.tool_name or "tool"
    raw = (event.tool_args or "").strip()
    args: object
    try:
        args = json.loads(raw) if raw else {}
    except ValueError:
        args = raw
    if not isinstance(args, dict):
        return Call(f"{name}({clip(str(args), 160)})", False, find_paths(str(args)), is_read_only_tool(name))
    if value := command_text(args).strip():
        command = clip(value, 240)
        # Read from the whole command: a clipped description is one line ("cd /app" of "cd /app\nnpm install").
        read_only = _only_runs(script(value), _READ_PROGRAMS, _READ_SUBCOMMANDS)
        return Call(f"$ {command}", True, find_paths(value), read_only, f"$ {value}")
    code = args.get("code")
    if isinstance(code, str) and code.strip():
        # Code execution: its output is scanned like a command's.
        description = clip(f"{name}(code={clip(code, 80)})", 240)
        return Call(description, True, [], False, description)
    parts = [f"{k}={clip(v if isinstance(v, str) else json.dumps(v, ensure_ascii=False), 80)}" for k, v in args.items()]
    return Call(clip(f"{name}({', '.join(parts)})", 240), False, arg_paths(args), is_read_only_tool(name))


def error_lines(content: str, *, command: str = "", reported: bool = False) -> list[tuple[str, bool]]:
    """The informative error lines of one tool output: at most two ``(line, strong)`` pairs.

    A *strong* line reports a failure by its shape (an exception line,
    ``error:``, ``FAILED``, an ``ERROR`` log record, a non-zero exit). A *weak*
    line merely mentions an error word: it counts only when there is no strong
    line and the failure shows otherwise (``reported``, or an executed command
    printed a traceback). Numbered file-view lines are never errors. The
    ``command`` that printed the output (empty for a tool that is no command)
    says whose words its last lines are: a reader's output is text read, and a
    list's ("a; b") may be an earlier part's.
    """
    executed = bool(command)
    kind = _command_kind(command)
    tools = kind.tools
    framed = any(t.framed for t in tools)
    mine = "|".join(t.anywhere.pattern for t in tools if t.anywhere)  # (its lines need no error word)
    own = re.compile(mine).match if mine else None
    lines = content.splitlines()
    if len(lines) > _SCAN_HEAD_LINES + _SCAN_TAIL_LINES:
        lines = lines[:_SCAN_HEAD_LINES] + lines[-_SCAN_TAIL_LINES:]
    strong: list[tuple[int, str]] = []
    weak: list[tuple[int, str]] = []
    traceback = False
    for position, line in enumerate(lines):
        stripped = line.strip()
        lowered = stripped.casefold()
        if lowered.startswith(_TRACEBACK_HEAD):
            traceback = True
            continue
        # Most lines are done here; only a stated exit status is no error word.
        # (not ansible's "db1 | UNREACHABLE! => {" without its JSON body: text a host's command printed)
        anywhere = bool(own and own(line)) and (not line.endswith("=> {") or bool(_JSON_KEY.match("".join(lines[position + 1 : position + 2]))))
        if len(stripped) < 4 or not (looks_like_error_line(stripped) or "exit" in lowered or anywhere):
            continue
        if FILE_LINE.match(line) or _VIEW_LINE.match(line):
            continue
        if framed and stripped.startswith(_FRAMED_ERROR) and position and lines[position - 1].strip() == _FRAME_OPEN:
            stripped = stripped[2:]
        unbulleted = _BULLET.sub("", stripped)
        if (
            is_strong_error_line(stripped)
            or _EXCEPTION_LINE.match(unbulleted)
            or _EVIDENCE_LINE.search(stripped)
            or (executed and _compiled_with_error(lines, position))
            or anywhere
        ):
            strong.append((position, unbulleted))
        elif not negates_error(stripped):
            weak.append((position, stripped))
    last = next((line for line in reversed(lines) if line.strip()), "")
    if any(t.passed and t.passed.match(last) and not any(_tool_says(t, s, False) for _, s in strong) for t in tools):
        strong = [s for s in strong if not _GOT_PAST.match(s[1])]  # the tally at the end says the run passed: a task failure was got past
    weak_counts = reported or (executed and traceback)
    if executed and not strong and not (weak and weak_counts):
        # No error line: the last lines may still say the command failed ("EXECUTION TIMED OUT").
        strong = _verdict(lines, command, kind, tools)
    pool = strong or (weak if weak_counts else [])
    # The first error says what broke, the last one is usually the cause
    # ("npm ERR! code ERESOLVE" ... / a traceback's final exception line).
    ordered = [pool[0], pool[-1], *reversed(pool[1:-1])] if pool else []
    picked: list[tuple[int, str]] = []
    for position, stripped in ordered:
        candidate = clip(stripped, _ERROR_CHARS)
        if all(digitless(candidate) != digitless(p) for _, p in picked):
            picked.append((position, candidate))
            if len(picked) >= _ERRORS_PER_RESULT:
                break
    picked.sort()
    return [(text, bool(strong)) for _, text in picked]


def _compiled_with_error(lines: list[str], position: int) -> bool:
    return (
        _COMPILER_ERROR.match(lines[position]) is not None
        and position + 1 < len(lines)
        and _SOURCE_CONTEXT.match(lines[position + 1]) is not None
    )


def _verdict(
    lines: list[str], command: str, kind: _CommandKind, tools: Sequence[_ToolVerdicts]
) -> list[tuple[int, str]]:
    """A failure verdict on the last meaningful lines of a command's output, as ``[(position, line)]``."""
    meaningful = [p for p, line in enumerate(lines) if len(line.strip()) >= 2 and not _NOISE_LINE.match(line.strip())]
    if not meaningful:
        return []
    reads, listed, trailing = kind.reads, kind.listed, kind.trailing
    powershell = _runs_powershell(command)
    # A reader prints other programs' words; a list's last words may be an earlier part's, got past; a
    # checker told to exit 0 (flake8, ruff, pylint --exit-zero) reports findings, not a failure.
    own = not (reads or listed or "--exit-zero" in command)
    if own and (status := _http_status(lines, meaningful[0])):
        return [status] if status[1].split()[1][0] in "45" else []
    ending = False  # only a refusal's own epilogue follows (git's hint, docker's "See '... --help'.")
    for seen, position in enumerate(reversed(meaningful[-_SUMMARY_LINES:])):
        line = lines[position]
        stripped = line.strip()
        if _VIEW_LINE.match(line) or len(stripped) > _VERDICT_CHARS:
            continue  # a file view's line; data (a verdict is one short line)
        if _HARNESS_VERDICT.match(stripped) or (seen == 0 and reads and _printers_refusal(lines, meaningful, command)):
            return [(position, stripped)]  # (a reader's own refusal: "cat: x: No such file or directory")
        if not own:
            continue
        if len(line) - len(line.lstrip()) >= _QUOTED_INDENT:
            continue  # quoted text (a commit message, a report): no verdict of the command's
        if powershell and (record := _powershell_record(lines, meaningful, position, powershell == "script")):
            return [record]
        # (the last lines of "a; echo done" but the echo's are the command's own)
        final = (seen <= trailing or ending) and _WENT_ON.search(stripped) is None
        if final and seen == 0 and _GO_DIAGNOSTIC.match(stripped):
            if _go_failed(lines, meaningful):
                return [(position, stripped)]
        elif final and seen == 0 and stripped == "FAIL":
            # go test's closing word on its packages, when one of them failed (its line may be far above)
            return [(p, lines[p].strip()) for p in meaningful if _GO_TEST_FAILED.match(lines[p])][:1]
        elif (
            (final and (_VERDICT.match(stripped) or _READERS_ERROR.match(stripped)))
            or _SUMMARY_VERDICT.match(stripped)
            or any(_tool_says(t, stripped, final) for t in tools)
        ):
            return [(position, stripped)]
        ending = (seen <= trailing or ending) and _EPILOGUE.match(stripped) is not None
    return []


class _CommandKind(NamedTuple):
    reads: bool
    listed: bool
    trailing: int
    printed_first: bool  # a part that only prints (cat, tail, echo) ran before the rest: its text leads the output
    # The tools it runs, when its output is its own words (not a log or file it printed, not a list's).
    tools: tuple[_ToolVerdicts, ...] = ()


def _tools_run(text: str) -> tuple[_ToolVerdicts, ...]:
    """The tools of :data:`_TOOLS` a shell command (read as a :func:`script`) names as a program (anywhere in it)."""
    words = _PROGRAM_WORD.findall(text)
    # A command's program (past wrappers and their flags: "sudo -E systemctl"), or a word that is no option's
    # value ("--tool dotnet" names no program; "--" ends the options: "kubectl exec x -- dotnet test").
    named = [w for before, w in zip(["", *words[:-1]], words, strict=True) if not before.startswith("-") or before == "--"]
    named += [w[0] for w in command_words(text)]
    names = {w.replace("\\", "/").rsplit("/", 1)[-1].lower() for w in named}
    programs = {w.removesuffix(".exe").removesuffix(".bat").removesuffix(".cmd") for w in names}
    return tuple(t for t in _TOOLS if any(t.names.fullmatch(w) for w in programs) and not (t.data and t.data.search(text)))


def _tool_says(tool: _ToolVerdicts, stripped: str, final: bool) -> bool:
    """True for a line that is ``tool``'s own verdict where it stands (``final``: among the last words)."""
    return (tool.summary is not None and tool.summary.match(stripped) is not None) or (
        final and tool.final is not None and tool.final.match(stripped) is not None
    )


def _command_kind(command: str) -> _CommandKind:
    """``(reads, listed, trailing)``: the shell command (``"$ ..."``) only prints text; it is a list of commands
    ("a; b", "a || b", one per line); how many print-only parts end it (``pytest; echo done``: 1).

    Setup that prints nothing when it works (``cd x; pytest``) makes no list, nor does what only prints
    before the rest (``cat setup.cfg; pytest``) or a word after it (``pytest; echo done``), nor a
    sequence under ``set -e`` (it stops at the first failure: its last words are the failed part's).
    Code run (``execute(code=...)``) is no shell command.
    """
    if not command.startswith("$ "):
        return _CommandKind(False, False, 0, False)
    text = script(command[2:])
    sequence = all(separator in ";\n" for separator in _LIST_SEPARATOR.findall(text))  # no "||", no "&"
    skipped = _SILENT_SETUP | _LEAD_PRINTERS if sequence else _SILENT_SETUP
    partwords = [words for part in _LIST_SEPARATOR.split(text) if (words := part.split())]
    parts = [words[0] for words in partwords]
    while len(parts) > 1 and parts[0] in skipped:
        parts.pop(0)
    # (an "a && b" chain is one part of the list: its first command may print too)
    lead = [(w[0], c) for c in commands(text) if (w := program_words(c)) and w[0] not in _SILENT_SETUP]
    printed_first = len(lead) > 1 and lead[0][0] in _FILE_PRINTERS and ">" not in lead[0][1]
    trailing = 0
    while sequence and len(parts) > 1 and parts[-1] in _TRAILING_PRINTERS:
        printer, words = parts.pop(), partwords.pop()
        trailing += printer == "date" or len(words) > 1  # a bare echo prints no words
    errexit = sequence and _ERREXIT.search(text) is not None
    reads = _only_runs(text, _TEXT_PRINTERS, _PRINTING_SUBCOMMANDS)
    listed = len(parts) > 1 and not errexit
    tools = () if reads or listed or printed_first else _tools_run(text)
    return _CommandKind(reads, listed, trailing, printed_first, tools)


def _printers_refusal(lines: list[str], meaningful: list[int], command: str) -> bool:
    """True for a last line that is a refusal of the printing command itself: perror's shape, a refusal naming
    one of its programs ("sort: write failed: ...: No space left on device"), a log printer's daemon or server
    refusing ("Error from server (NotFound): pods "x" not found"), a reader's own error where it is credible:
    jq's unless jq prints raw text (-r), sed's or awk's on their script when nothing but it was printed (or sed -i)."""
    stripped = lines[meaningful[-1]].strip()
    if _REFUSAL.match(stripped):
        return True
    parts = {w[0].rsplit("/", 1)[-1]: w[1:] for w in command_words(command[2:])}
    if (name := stripped.split(":", 1)[0]) in parts and _READERS_ERROR.match(stripped) and not _VERDICT.match(stripped):
        if name == "jq":
            return not any(_RAW_JQ.fullmatch(w) for w in parts[name])
        alone = all(lines[p].lstrip().startswith(f"{name}:") for p in meaningful)
        return alone or (name == "sed" and any(_SED_IN_PLACE.fullmatch(w) for w in parts[name]))
    if name in parts:
        return _VERDICT.match(stripped) is not None
    programs = set(parts)
    return bool(programs & _LOG_PROGRAMS) and _DAEMON_REFUSAL.match(stripped) is not None


def _runs_powershell(command: str) -> str:
    """What PowerShell runs of a shell command (``"$ ..."``): ``"script"`` (a ``.ps1``, ``pwsh -File``),
    ``"cmdlet"`` (a cmdlet, ``pwsh -Command``), ``""`` when PowerShell runs none of it."""
    parts = commands(command[2:]) if command.startswith("$ ") else []
    words = program_words(parts[0]) if parts else []
    program = words[0].replace("\\", "/").rsplit("/", 1)[-1] if words else ""
    if not _POWERSHELL_PROGRAM.fullmatch(program):
        return ""
    script = program.lower().endswith(".ps1") or any(w.lower().endswith(".ps1") or w.lower() == "-file" for w in words[1:3])
    return "script" if script else "cmdlet"


def _powershell_record(lines: list[str], meaningful: list[int], position: int, script: bool) -> tuple[int, str] | None:
    """PowerShell's error at ``lines[position]``, when only the error's own lines follow (a script that went
    on past it did not fail): PowerShell 7's line (then its "Line |" frame, which a failure in a ``script``
    always has; a cmdlet's own may be its message alone, an error's), or the message of Windows
    PowerShell's record whose "At ..." line this is (then its "+ " lines), unless the record wraps a native
    program's stderr (``git : Everything up-to-date``: git exited 0)."""
    stripped = lines[position].strip()
    at = meaningful.index(position)
    rest = [lines[p].strip() for p in meaningful[at + 1 :]]
    if _POWERSHELL_ERROR.match(stripped):
        framed = all(_POWERSHELL_FRAME.match(r) for r in rest)
        alone = not script and _ERROR_WORDS.search(stripped) is not None and not negates_error(stripped)
        return (position, stripped) if framed and (rest or alone) else None
    if not (_POWERSHELL_AT.match(stripped) and at > 0 and all(r.startswith("+") for r in rest)):
        return None
    if any("NativeCommandError" in r for r in rest):
        return None
    return meaningful[at - 1], lines[meaningful[at - 1]].strip()


def _http_status(lines: list[str], first: int) -> tuple[int, str] | None:
    """The final status line of a response's head printed first (curl -i / -I), after any redirects."""
    status = None
    position = first
    while position < len(lines) and _HTTP_STATUS.match(lines[position]):
        status = (position, lines[position].strip())
        position += 1
        while position < len(lines) and _HTTP_HEADER.match(lines[position]):
            position += 1
        while position < len(lines) and not lines[position].strip():
            position += 1
    return status


def _go_failed(lines: list[str], meaningful: list[int]) -> bool:
    """True for go build's errors: a package's "# pkg" header, then its diagnostics to the end (not -m's notes)."""
    for position in reversed(meaningful):
        line = lines[position]
        if _GO_PACKAGE.match(line):
            return True
        if not (_GO_DIAGNOSTIC.match(line) or line.startswith("\t")) or _GO_NOTE.search(line):
            return False
    return False


def digitless(text: str) -> str:
    """``text`` normalized with its numbers masked: log lines differ only in timestamps and counters."""
    return re.sub(r"\d+", "#", normalize(text))


def first_meaningful_line(content: str) -> str:
    """The first line of ``content`` that is not blank or punctuation only, clipped."""
    for line in content[:20_000].splitlines()[:200]:
        stripped = line.strip()
        if len(stripped) >= 3 and not _NOISE_LINE.match(stripped):
            return clip(stripped, TOOL_NOTE_CHARS)
    return ""


_SMALL_NUMBER: Final = re.compile(r"^\d{1,2}$")
_ALONE_LINES: Final = 2
_FINDING_LINES: Final = 40  # a finding heads its output; below that is the content it introduced


def finding(content: str) -> tuple[str, frozenset[str], bool]:
    """``(line, values, alone)``: a successful result's first line that is a finding, not noise-shaped.

    ``values`` are the line's tokens a decision or fix could cite (ids,
    versions, numbers of 3+ digits; no paths); ``alone`` says the whole output
    is that line and names a value: a fact on its own.
    """
    meaningful = 0
    found = ""
    for line in content[:8_000].splitlines()[:_FINDING_LINES]:
        stripped = line.strip()
        if len(stripped) < 2 or _NOISE_LINE.match(stripped):
            continue
        meaningful += 1
        if not found and not (_LOG_RECORD.match(line) or _CODE_SHAPED.match(line)):
            found = clip(stripped, TOOL_NOTE_CHARS)
        if found and meaningful > _ALONE_LINES:
            break
    if not found:
        return "", frozenset(), False
    paths = [normalize(p) for p in find_paths(found)]
    values = frozenset(
        t for t in key_tokens(found) if not any(t in p for p in paths) and not _SMALL_NUMBER.match(t)
    )
    return found, values, bool(values) and meaningful <= _ALONE_LINES
