"""More of the shapes agents meet: a command that writes is a step (never dropped as a read), and a tool's
own verdict (ansible, dotnet test, the AWS CLI, jq, sed, awk) files a command as failed, while a run that
only got past a failure (ansible's ignored or rescued task) stays a working recipe."""

from __future__ import annotations

import json

import pytest

from aiden.events import SessionEvent
from aiden.policy.shell import command_words
from aiden.summarizers.extractive.tools import describe_call, error_lines, is_read_only_command


def _read_only(command: str) -> bool:
    event = SessionEvent(type="tool_call", tool_name="bash", tool_call_id="c1", tool_args=json.dumps({"command": command}))
    return describe_call(event).read_only


# Each writes a file or runs a program beside a read: a step to redo, not a file read (each was read-only).
WRITES = [
    "find . -name '*.pyc' -fprintf out.txt '%p\\n'",
    "find . -type f -fprint0 files.bin",
    "find . -type f -fls listing.txt",
    "find . -name '*.pyc' -okdir rm {} ;",
    "git diff --output=patch.diff",
    "git diff main --output patch.diff",
    "git -C repo log -p --output=log.txt",
    "tree -o tree.txt",
    "tree -L 2 -o tree.txt",
    "ls & rm -rf build",
    "tail -f app.log & npm start",
    "sort -u -o sorted.txt names.txt | head",
    "ls & sleep 1; rm -rf build",
]


@pytest.mark.parametrize("command", WRITES)
def test_a_command_that_writes_is_no_read(command: str) -> None:
    assert not _read_only(command)
    assert not is_read_only_command(f"$ {command}")


# Reads that look like the writes above: still reads.
READS = [
    "tail -f app.log &",
    "ls 2>&1 | head",
    "cat a.txt &> /dev/null",
    "find . -name '*.log' -newer stamp -print",
    "git diff --stat",
    "git log --oneline --no-merges",
    "tree -L 2 -I node_modules",
    "ls -la --sort=size -o",
    "grep -o 'error [0-9]*' app.log",
    # ... an escaped "&", one before "wait" or "sleep N", one in "$(...)" or a comment; find's, tree's, sort's and
    # git's words only as their program's own arguments (each was no read on 06691b0)
    "grep -n AT\\&T contacts.csv",
    "ls Q\\&A/",
    "grep -rn foo src > /dev/null & grep -rn foo tests & wait",
    "find / -name libssl.so* 2>/dev/null & wait",
    "cat log.txt & sleep 2",
    "ls $(echo src & echo tests)",
    "ls -la  # & rm -rf build",
    "grep -rn -- -fprintf docs/",
    "grep -n -e -fls find/ftsfind.c",
    "find sklearn/tree -name '*.pyx' -o -name '*.pxd'",
    "find . -path ./tree -prune -o -name '*.py' -print",
    "find . -name sort -o -name tree",
    "find lib/sort -name '*.go' -o -name '*.s'",
    "git grep -n -- --output= scripts/",
    "git diff --output-indicator-new=+ main",
    "ls -la tree -o",
    "grep -rn criterion sklearn/tree -o",
]


@pytest.mark.parametrize("command", READS)
def test_a_read_stays_a_read(command: str) -> None:
    assert _read_only(command)
    assert is_read_only_command(f"$ {command}")


def test_a_backgrounded_command_runs_beside_the_next() -> None:
    assert command_words("tail -f log & npm start") == [["tail", "-f", "log"], ["npm", "start"]]
    assert command_words("make 2>&1 | tee log") == [["make", "2>&1"], ["tee", "log"]]
    assert command_words("make &> log && ls") == [["make", "&>", "log"], ["ls"]]


_RULE = "*" * 40
_HOST = "web{}                       : ok={}    changed=1    unreachable={}    failed={}    skipped=0    rescued={}    ignored={}\n"


def _filed(command: str, output: str) -> list[str]:
    return [line for line, _ in error_lines(output, command=f"$ {command}")]


# (command, output, the line the failure is filed with): each was a WORKING RECIPE.
FAILURES = [
    (
        "ansible all -i hosts -m ping",
        'web1 | UNREACHABLE! => {\n    "changed": false,\n    "msg": "Failed to connect to the host via ssh: ssh: connect'
        ' to host 10.0.0.5 port 22: No route to host",\n    "unreachable": true\n}\n',
        "web1 | UNREACHABLE! => {",
    ),
    (
        "dotnet test",
        "  Failed Tests.UnitTest1.Adds [5 ms]\n  Error Message:\n   Assert.Equal() Failure\n\n"
        "Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 12 ms - Tests.dll (net8.0)\n"
        + "".join(f"Passed!  - Failed:     0, Passed:     5, Skipped:     0, Total:     5, Duration: 8 ms - T{i}.dll (net8.0)\n" for i in range(5)),
        "Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 12 ms - Tests.dll (net8.0)",
    ),
    (
        "dotnet test --no-build",
        "Failed!  - Failed:     2, Passed:    10, Skipped:     0, Total:    12, Duration: 40 ms - App.Tests.dll (net8.0)\n\n"
        "Attachments:\n" + "".join(f"  /app/TestResults/{i}/coverage.cobertura.xml\n" for i in range(4))
        + "Results File: /app/TestResults/run.trx\n",
        "Failed!  - Failed:     2, Passed:    10, Skipped:     0, Total:    12, Duration: 40 ms - App.Tests.dll (net8.0)",
    ),
    (
        "aws s3 ls --endpoint-url http://localhost:4566",
        '\nCould not connect to the endpoint URL: "http://localhost:4566/"\n',
        'Could not connect to the endpoint URL: "http://localhost:4566/"',
    ),
    (
        "aws ec2 describe-instances --max-items abc",
        "\nParameter validation failed:\nInvalid type for parameter MaxItems, value: abc, type: <class 'str'>, valid types:"
        " <class 'int'>\n",
        "Parameter validation failed:",
    ),
    (
        "aws cloudformation deploy --template-file t.yml --stack-name app",
        "\nWaiting for changeset to be created..\nWaiting for stack create/update to complete\n\nFailed to create/update the"
        " stack. Run the following command\nto fetch the list of events leading up to the failure\n"
        "aws cloudformation describe-stack-events --stack-name app\n",
        "Failed to create/update the stack. Run the following command",
    ),
    ("jq '.items[].name' data.json", 'jq: error (at data.json:0): Cannot index array with "items"\n', 'jq: error (at data.json:0): Cannot index array with "items"'),
    ("curl -s localhost:8000/api | jq .items", 'jq: error (at <stdin>:0): Cannot index string with "items"\n', 'jq: error (at <stdin>:0): Cannot index string with "items"'),
    (
        "jq '.items[' data.json",
        "jq: error: syntax error, unexpected end of file (Unix shell quoting issues?) at <top-level>, line 1:\n.items[\n"
        "jq: 1 compile error\n",
        "jq: 1 compile error",
    ),
    ("jq . bad.json", "jq: parse error: Invalid numeric literal at line 1, column 6\n", "jq: parse error: Invalid numeric literal at line 1, column 6"),
    ("sed -i 's/foo/bar' app.py", "sed: -e expression #1, char 9: unterminated `s' command\n", "sed: -e expression #1, char 9: unterminated `s' command"),
    (
        "awk '{print $1' data.txt",
        "awk: cmd. line:1: {print $1\nawk: cmd. line:1:          ^ unexpected newline or end of string\n",
        "awk: cmd. line:1:          ^ unexpected newline or end of string",
    ),
    ("mawk '{print $1' data.txt", "mawk: line 1: syntax error at or near end of line\n", "mawk: line 1: syntax error at or near end of line"),
    (
        "ansible-playbook site.yml",
        f"TASK [install] {_RULE}\nfatal: [web2]: FAILED! => {{\"changed\": false, \"msg\": \"No package matching 'nginxx'\"}}\n"
        f"\nPLAY RECAP {_RULE}\n" + "".join(_HOST.format(i, 2, 0, int(i == 2), 0, 0) for i in range(1, 9)),
        "fatal: [web2]: FAILED! => {\"changed\": false, \"msg\": \"No package matching 'nginxx'\"}",
    ),
]


@pytest.mark.parametrize(("command", "output", "line"), FAILURES)
def test_a_tools_verdict_files_the_command_as_failed(command: str, output: str, line: str) -> None:
    assert " ".join(line.split()) in _filed(command, output)  # (a filed line's blanks are collapsed)


# ansible's recap says the run passed: the failure of a task it ignored or rescued is none (each was FAILED).
def test_a_task_failure_ansible_got_past_is_no_failure() -> None:
    fatal = 'fatal: [web1]: FAILED! => {"changed": true, "msg": "non-zero return code", "rc": 1}\n'
    ignored = f"TASK [migrate] {_RULE}\n{fatal}...ignoring\n\nPLAY RECAP {_RULE}\n" + _HOST.format(1, 3, 0, 0, 0, 1)
    rescued = f"TASK [migrate] {_RULE}\n{fatal}\nTASK [fallback] {_RULE}\nok: [web1]\n\nPLAY RECAP {_RULE}\n" + _HOST.format(1, 2, 0, 0, 1, 0)
    assert _filed("ansible-playbook -i hosts deploy.yml", ignored + "\n") == []
    assert _filed("ansible-playbook deploy.yml", rescued) == []
    # ... but not when another host's recap failed, nor when something after the recap failed
    two = rescued.replace(_HOST.format(1, 2, 0, 0, 1, 0), _HOST.format(1, 2, 0, 0, 1, 0) + _HOST.format(2, 1, 1, 0, 0, 0))
    assert _filed("ansible-playbook deploy.yml", two)
    assert _filed("ansible-playbook deploy.yml && curl -sf localhost/health", rescued + "curl: (22) The requested URL returned error: 503\n")


# The same lines printed by a reader, and successes in the same tools' words: no failure.
PASSES = [
    ("grep -h 'Failed!' build.log", "Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 3 ms - T.dll (net8.0)\n"),
    ("cat ansible.log", f"PLAY RECAP {_RULE}\n" + _HOST.format(1, 0, 1, 0, 0, 0)),
    ("dotnet test", "Passed!  - Failed:     0, Passed:     3, Skipped:     0, Total:     3, Duration: 30 ms - Tests.dll (net8.0)\n"),
    ("ansible-playbook site.yml", f"TASK [x] {_RULE}\nchanged: [web1]\n\nPLAY RECAP {_RULE}\n" + _HOST.format(1, 4, 0, 0, 0, 0)),
    ("aws cloudformation deploy --template-file t.yml --stack-name app", "\nWaiting for stack create/update to complete\nSuccessfully created/updated stack - app\n"),
    ("aws cloudformation describe-stacks --stack-name app --query 'Stacks[0].StackStatus' --output text", "ROLLBACK_COMPLETE\n"),
    ("jq . resp.json", '{\n  "error": null,\n  "status": "ok"\n}\n'),
    ("jq '.errors | length' resp.json", "0\n"),
    ("sed -n '1,4p' app.py", "import os\n\nclass AppError(Exception):\n    pass\n"),
    ("awk -F, '{print $2}' data.csv", "failed\nok\nfailed\n"),
    ("cat notes.txt", "jq: error (at <stdin>:0): Cannot index string with \"items\" is what we saw yesterday\n"),
    # a reader printing text read from elsewhere, the AWS CLI printing data, an ad-hoc command printing a log
    # (each was a failure on 06691b0)
    ("jq -r '.jobs[].log_tail' ci-run.json", "build ok\njq: error (at <stdin>:0): Cannot iterate over null\n"),
    ("jq -r '.steps[-1].stderr' run.json", "jq: parse error: Invalid numeric literal at line 1, column 10\n"),
    ("cat build.log | sed -n '/error/,+1p'", "step 7: error in patch step\nsed: -e expression #1, char 9: unterminated `s' command\n"),
    ("sed -n '200,260p' ci-output.txt", "+ sed -i s/foo/bar config.ini\nsed: -e expression #1, char 9: unterminated `s' command\n"),
    ("awk '/awk:/' ci.log", "awk: cmd. line:1: {print $1\n"),
    (
        "aws stepfunctions describe-execution --execution-arn arn:aws:states:us-east-1:1:execution:etl:run-7 --query cause --output text",
        "Parameter validation failed:\nInvalid type for parameter Item.id, value: 42, type: <class 'int'>, valid types: <class 'dict'>\n",
    ),
    (
        "aws s3 cp s3://ci-logs/run-42/deploy.log - | tail -n 5",
        '2024-05-14T10:00:09Z uploading artifacts\nCould not connect to the endpoint URL: "https://sqs.us-east-1.amazonaws.com/"\n',
    ),
    (
        "aws s3 cp s3://ci-logs/run-42/deploy.log -",
        "Waiting for stack create/update to complete\n\nFailed to create/update the stack. Run the following command\n"
        "to fetch the list of events leading up to the failure\naws cloudformation describe-stack-events --stack-name app\n",
    ),
    (
        "ansible web1 -i hosts -m shell -a 'tail -n 3 /var/log/deploy.log'",
        "web1 | CHANGED | rc=0 >>\n2024-05-14 09:12:01 deploy: starting\ndb1 | UNREACHABLE! => {\n2024-05-14 09:12:09 deploy: done\n",
    ),
]


@pytest.mark.parametrize(("command", "output"), PASSES)
def test_no_failure(command: str, output: str) -> None:
    assert _filed(command, output) == []


# ... but a reader's own refusal of its script still is, and ansible's passing recap clears only the task failures it
# got past, not another tool's verdict (dotnet test's tally was cleared on 06691b0)
@pytest.mark.parametrize(
    ("command", "output"),
    [
        ("sed -i 's/foo/bar' config.ini", "sed: -e expression #1, char 9: unterminated `s' command\n"),
        ("sed -n '1,5x' a.txt", "sed: -e expression #1, char 5: unknown command: `x'\n"),
        ("gawk -F, '{ sum += $3 } END { print sum/0 }' a.csv", "gawk: cmd. line:1: fatal: division by zero attempted\n"),
        ("aws s3 cp s3://b/missing.log -", "fatal error: An error occurred (404) when calling the HeadObject operation: Not Found\n"),
        (
            "dotnet test | tee test.log && ansible-playbook -i hosts deploy.yml",
            "Failed!  - Failed:     1, Passed:    41, Skipped:     0, Total:    42, Duration: 212 ms - Shop.Tests.dll (net8.0)\n"
            f"TASK [deploy] {_RULE}\nchanged: [web1]\n\nPLAY RECAP {_RULE}\n" + _HOST.format(1, 3, 0, 0, 0, 0),
        ),
    ],
)
def test_a_credible_own_verdict_still_files_a_failure(command: str, output: str) -> None:
    assert _filed(command, output)
