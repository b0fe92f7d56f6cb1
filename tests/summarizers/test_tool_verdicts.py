"""A tool's own verdict, where it prints it (its closing summary, its last line), files a command as failed.

Test runners, checkers, compilers, git, package managers, daemons and the shell print whether a run failed
in documented shapes at the end of their output: pytest/jest/rspec/go tallies, mypy/ruff/tsc's "Found N
errors", eslint's "✖ N problems (N errors", git's "CONFLICT (...)" and "Automatic merge failed", docker's
"Error response from daemon", curl -i's status line, a death by a signal. Outputs that only mention failure
words ("0 failed", "Found 0 errors", "All checks passed!", a test named test_wrong_flag, a grep hit quoting
"Permission denied") stay working recipes. Every failure here was a WORKING RECIPE before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import Config
from aiden.events import SessionEvent
from aiden.summarizers.extractive.tools import error_lines
from aiden.summarizers.mustkeep.text import clip
from tests.summarizers.sections import session_sections

BUDGET = 2000


def _ran(command: str, output: str, call_id: str = "c1") -> list[SessionEvent]:
    return [
        SessionEvent(type="tool_call", tool_name="bash", tool_call_id=call_id, tool_args=json.dumps({"command": command})),
        SessionEvent(type="tool_result", tool_name="bash", tool_call_id=call_id, content=output),
    ]


def _session(command: str, output: str) -> dict[str, list[str]]:
    events = [SessionEvent(type="user_input", content="Build the project and make the checks pass."), *_ran(command, output)]
    return session_sections(events, BUDGET)


# (command, output, the line the failure is filed with)
FAILURES = [
    ("submit 'flag{guess}'", "Wrong flag!\n", "Wrong flag!"),
    ("./checker 'flag{guess}'", "Incorrect flag.\n", "Incorrect flag."),
    ("ssh deploy@10.0.0.5 uptime", "deploy@10.0.0.5: Permission denied (publickey).\n", "deploy@10.0.0.5: Permission denied (publickey)."),
    ("ssh -p 2222 ci@build01 true", "Permission denied (publickey,password).\n", "Permission denied (publickey,password)."),
    (
        "mypy src",
        'src/a.py:3: error: Incompatible return value type (got "int", expected "str")  [return-value]\n'
        "Found 1 error in 1 file (checked 3 source files)\n",
        "Found 1 error in 1 file (checked 3 source files)",
    ),
    (
        "git merge feature",
        "Auto-merging x.py\nCONFLICT (content): Merge conflict in x.py\n"
        "Automatic merge failed; fix conflicts and then commit the result.\n",
        "Automatic merge failed; fix conflicts and then commit the result.",
    ),
    (
        "git stash pop",
        "Auto-merging x.py\nCONFLICT (content): Merge conflict in x.py\nThe stash entry is kept in case you need it again.\n",
        "The stash entry is kept in case you need it again.",
    ),
    (
        "git stash apply",
        "Auto-merging x.py\nCONFLICT (content): Merge conflict in x.py\nOn branch main\nUnmerged paths:\n"
        "\tboth modified:   x.py\n\nThe stash entry is kept in case you need it again.\n",
        "The stash entry is kept in case you need it again.",
    ),
    ("python -m pytest -q", "....E\n4 passed, 1 error in 0.12s\n", "4 passed, 1 error in 0.12s"),
    (
        "npm install left-padz",
        "npm error code E404\nnpm error 404 Not Found - GET https://registry.npmjs.org/left-padz - Not found\n"
        "npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log\n",
        "npm error A complete log of this run can be found in: /root/.npm/_logs/debug-0.log",
    ),
    (
        "go test ./...",
        "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\nFAIL\texample.com/app\t0.012s\n",
        "FAIL\texample.com/app\t0.012s",
    ),
    ("go build ./...", "# example.com/app\n./main.go:5:2: undefined: foo\n", "./main.go:5:2: undefined: foo"),
    (
        "go vet ./...",
        "# example.com/app\n# [example.com/app]\n./main.go:9:2: fmt.Printf format %d has arg s of wrong type string\n",
        "./main.go:9:2: fmt.Printf format %d has arg s of wrong type string",
    ),
    (
        "npx jest",
        "FAIL src/a.test.js\n  ● adds\n\nTest Suites: 1 failed, 1 total\nTests:       1 failed, 3 passed, 4 total\n"
        "Snapshots:   0 total\nTime:        1.2 s\nRan all test suites.\n",
        "Tests:       1 failed, 3 passed, 4 total",
    ),
    ("pytest -q", "..F.\n1 failed, 3 passed, 1 warning in 0.05s\n", "1 failed, 3 passed, 1 warning in 0.05s"),
    (
        "bundle exec rspec",
        "..F\n\nFinished in 0.02 seconds (files took 0.1 seconds to load)\n3 examples, 1 failure\n\n"
        "Failed examples:\n\nrspec ./spec/a_spec.rb:4 # A works\n",
        "3 examples, 1 failure",
    ),
    ("make test", "make: *** No rule to make target 'test'.  Stop.\n", "make: *** No rule to make target 'test'.  Stop."),
    (
        "docker run acme/img",
        "Unable to find image 'acme/img:latest' locally\ndocker: Error response from daemon: pull access denied for acme/img.\n"
        "See 'docker run --help'.\n",
        "docker: Error response from daemon: pull access denied for acme/img.",
    ),
    ("kubectl get pod web", 'Error from server (NotFound): pods "web" not found\n', 'Error from server (NotFound): pods "web" not found'),
    (
        "curl -si localhost:8000/api",
        'HTTP/1.1 500 Internal Server Error\ncontent-type: application/json\n\n{"detail": "boom"}\n',
        "HTTP/1.1 500 Internal Server Error",
    ),
    (
        "./a.out input.txt",
        "reading input\nbash: line 1:  4242 Segmentation fault      (core dumped) ./a.out input.txt\n",
        "bash: line 1:  4242 Segmentation fault      (core dumped) ./a.out input.txt",
    ),
    ("./a.out", "a.out: main.c:5: main: Assertion `x > 0' failed.\nAborted (core dumped)\n", "Aborted (core dumped)"),
    ("./long.sh", "step 1\nTerminated\n", "Terminated"),
    (
        "ruff check .",
        "app.py:1:8: F401 [*] `os` imported but unused\nFound 3 errors.\n[*] 1 fixable with the `--fix` option.\n",
        "Found 3 errors.",
    ),
    (
        "npx eslint src",
        "/app/src/a.js\n  1:7  error  'x' is assigned a value but never used  no-unused-vars\n\n✖ 2 problems (2 errors, 0 warnings)\n",
        "✖ 2 problems (2 errors, 0 warnings)",
    ),
    ("flake8 src", "src/app.py:9:80: E501 line too long (97 > 79 characters)\n", "src/app.py:9:80: E501 line too long (97 > 79 characters)"),
    (
        "npx tsc --noEmit --pretty false",
        "src/a.ts(3,5): error TS2322: Type 'number' is not assignable to type 'string'.\n",
        "src/a.ts(3,5): error TS2322: Type 'number' is not assignable to type 'string'.",
    ),
    (
        "python tool.py",
        "usage: tool.py [-h] path\ntool.py: error: the following arguments are required: path\n",
        "tool.py: error: the following arguments are required: path",
    ),
    ("apt-get install -y jqq", "Reading package lists...\nE: Unable to locate package jqq\n", "E: Unable to locate package jqq"),
    (
        "systemctl start nginx",
        "Failed to start nginx.service: Unit nginx.service not found.\n",
        "Failed to start nginx.service: Unit nginx.service not found.",
    ),
    (
        "nginx -t",
        'nginx: [emerg] unknown directive "proxy_passs" in /etc/nginx/conf.d/app.conf:7\n'
        "nginx: configuration file /etc/nginx/nginx.conf test failed\n",
        "nginx: configuration file /etc/nginx/nginx.conf test failed",
    ),
    ("kill 99999", "bash: kill: (99999) - No such process\n", "bash: kill: (99999) - No such process"),
    ("ping -c 1 db.internal", "ping: db.internal: Name or service not known\n", "ping: db.internal: Name or service not known"),
    (
        "ssh ci@build02",
        "ssh: Could not resolve hostname build02: Temporary failure in name resolution\n",
        "ssh: Could not resolve hostname build02: Temporary failure in name resolution",
    ),
    (
        "black --check .",
        "would reformat app.py\n\nOh no! 💥 💔 💥\n1 file would be reformatted, 3 files would be left unchanged.\n",
        "Oh no! 💥 💔 💥",
    ),
    (
        "ctest",
        "67% tests passed, 1 tests failed out of 3\n\nTotal Test time (real) =   0.03 sec\n\nThe following tests FAILED:\n"
        "\t  2 - parse (Failed)\nErrors while running CTest\n",
        "Errors while running CTest",
    ),
    # build tools, a service manager, cloud CLIs and Windows shells (each failure was a WORKING RECIPE)
    (
        "./gradlew build",
        "> Task :compileJava\n\nFAILURE: Build failed with an exception.\n\n* What went wrong:\nExecution failed for task"
        " ':compileJava'.\n\n* Try:\n> Run with --stacktrace option to get the stack trace.\n\nBUILD FAILED in 2s\n"
        "1 actionable task: 1 executed\n",
        "BUILD FAILED in 2s",
    ),
    (
        "dotnet build",
        "  Determining projects to restore...\n/app/Program.cs(3,1): error CS0103: The name 'Foo' does not exist in the"
        " current context [/app/app.csproj]\n\nBuild FAILED.\n\n/app/Program.cs(3,1): error CS0103: The name 'Foo' does not"
        " exist in the current context [/app/app.csproj]\n    0 Warning(s)\n    1 Error(s)\n\nTime Elapsed 00:00:01.23\n",
        "1 Error(s)",
    ),
    (
        "dotnet build src/App.csproj",
        "Build FAILED.\n\nCSC : a [App.csproj]\nCSC : b [App.csproj]\nCSC : c [App.csproj]\n    0 Warning(s)\n"
        "    3 Error(s)\n\nTime Elapsed 00:00:02.01\n",
        "3 Error(s)",
    ),
    (
        "dotnet test",
        "  Failed Tests.UnitTest1.Test1 [12 ms]\n\nFailed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3,"
        " Duration: 30 ms - Tests.dll (net8.0)\n",
        "Failed!  - Failed:     1, Passed:     2, Skipped:     0, Total:     3, Duration: 30 ms - Tests.dll (net8.0)",
    ),
    (
        "vendor/bin/phpunit",
        "..F                                                                 3 / 3 (100%)\n\nTime: 00:00.012, Memory: 8.00 MB"
        "\n\nThere was 1 failure:\n\n1) CalcTest::testAdd\nFailed asserting that 4 matches expected 3.\n\n"
        "/app/tests/CalcTest.php:9\n\nFAILURES!\nTests: 3, Assertions: 3, Failures: 1.\n",
        "Tests: 3, Assertions: 3, Failures: 1.",
    ),
    (
        "terraform apply -auto-approve",
        "aws_instance.web: Creating...\n\u2577\n\u2502 Error: creating EC2 Instance: InvalidAMIID.NotFound\n\u2502\n"
        "\u2502   with aws_instance.web,\n\u2502   on main.tf line 10, in resource \"aws_instance\" \"web\":\n\u2575\n",
        "Error: creating EC2 Instance: InvalidAMIID.NotFound",
    ),
    (
        "ansible-playbook site.yml",
        "PLAY RECAP ***\nweb1                       : ok=3    changed=0    unreachable=0    failed=1    skipped=0\n",
        "web1                       : ok=3    changed=0    unreachable=0    failed=1    skipped=0",
    ),
    (
        "sudo systemctl restart nginx",
        "Job for nginx.service failed because the control process exited with error code.\nSee \"systemctl status"
        " nginx.service\" and \"journalctl -xeu nginx.service\" for details.\n",
        "Job for nginx.service failed because the control process exited with error code.",
    ),
    (
        "aws s3 ls s3://reports",
        "\nAn error occurred (AccessDenied) when calling the ListObjectsV2 operation: Access Denied\n",
        "An error occurred (AccessDenied) when calling the ListObjectsV2 operation: Access Denied",
    ),
    (
        "foo --version",
        "'foo' is not recognized as an internal or external command,\noperable program or batch file.\n",
        "'foo' is not recognized as an internal or external command,",
    ),
    (
        "Remove-Item C:\\app\\cache",
        "Remove-Item : Cannot find path 'C:\\app\\cache' because it does not exist.\nAt line:1 char:1\n+ Remove-Item"
        " C:\\app\\cache\n+ ~~~~~~~~~~~\n    + CategoryInfo          : ObjectNotFound: (C:\\app\\cache:String) [Remove-Item],"
        " ItemNotFoundException\n    + FullyQualifiedErrorId : PathNotFound,Microsoft.PowerShell.Commands.RemoveItemCommand\n",
        "Remove-Item : Cannot find path 'C:\\app\\cache' because it does not exist.",
    ),
    (
        "pwsh -c Get-Foo",
        "Get-Foo: The term 'Get-Foo' is not recognized as a name of a cmdlet, function, script file, or executable"
        " program.\n",
        "Get-Foo: The term 'Get-Foo' is not recognized as a name of a cmdlet, function, script file, or executable program.",
    ),
    # a word printed after the command ("; echo ...") leaves its tally the command's verdict
    ("npm test; echo finished", "> jest\n\n  \u2715 adds (3 ms)\n\nTests:       1 failed, 1 total\nfinished\n", "Tests:       1 failed, 1 total"),
    (
        'git merge feature; echo "merge exit: $?"',
        "Auto-merging app.py\nCONFLICT (content): Merge conflict in app.py\nAutomatic merge failed; fix conflicts and then"
        " commit the result.\nmerge exit: 1\n",
        "Automatic merge failed; fix conflicts and then commit the result.",
    ),
    # a review's misses of the first version
    (
        "aws s3 cp s3://b/q3.csv .",
        "fatal error: An error occurred (404) when calling the HeadObject operation: Key \"q3.csv\" does not exist\n",
        'fatal error: An error occurred (404) when calling the HeadObject operation: Key "q3.csv" does not exist',
    ),
    (
        "systemctl --user restart app",
        "Job for app.service failed because the control process exited with error code.\nSee \"systemctl --user status"
        " app.service\" and \"journalctl --user -xeu app.service\" for details.\n",
        "Job for app.service failed because the control process exited with error code.",
    ),
    (
        "ansible web -m shell -a 'foo --version'",
        "web1 | FAILED | rc=127 >>\n/bin/sh: 1: foo: not found\nnon-zero return code\n",
        "web1 | FAILED | rc=127 >>",
    ),
    (
        "dotnet restore",
        "  Determining projects to restore...\n/app/App.csproj : error NU1101: Unable to find package Foo.Bar.\n"
        "  Failed to restore /app/App.csproj (in 402 ms).\n",
        "Failed to restore /app/App.csproj (in 402 ms).",
    ),
    ("dotnet build", "Restore complete (0.4s)\n  App failed with 1 error(s) (1.2s)\n\nBuild failed with 1 error(s) in 2.1s\n",
     "Build failed with 1 error(s) in 2.1s"),
    ("dotnet run", "Unhandled exception. System.InvalidOperationException: no config\n   at Program.Main() in /app/Program.cs:line 3\n",
     "Unhandled exception. System.InvalidOperationException: no config"),
    ("cmd /c del C:\\Windows\\hosts", "Access is denied.\n", "Access is denied."),
    ("rmdir C:\\nowhere", "The system cannot find the file specified.\n", "The system cannot find the file specified."),
    # a fourth review's: a log printer's own refusal is still its verdict
    ("kubectl logs api-7d9f8-xk2p --tail=50", 'Error from server (NotFound): pods "api-7d9f8-xk2p" not found\n',
     'Error from server (NotFound): pods "api-7d9f8-xk2p" not found'),
    ("docker logs api", "Error response from daemon: No such container: api\n", "Error response from daemon: No such container: api"),
    ("sort -S 50% -k2,2 huge.csv | uniq -c | sort -rn | head", "sort: write failed: /tmp/sortA1b2C3: No space left on device\n",
     "sort: write failed: /tmp/sortA1b2C3: No space left on device"),
    # a fifth review's: a tool run after a command that prints no file (which, pwd), behind a wrapper's flag;
    # PowerShell 7's error in its frame
    ("which dotnet && dotnet build", "/usr/bin/dotnet\n\nBuild FAILED.\n\n    0 Warning(s)\n    1 Error(s)\n", "1 Error(s)"),
    (
        "sudo -E systemctl restart api",
        "Job for api.service failed because the control process exited with error code.\nSee \"systemctl status"
        " api.service\" for details.\n",
        "Job for api.service failed because the control process exited with error code.",
    ),
    (
        "pwsh -File ./deploy.ps1",
        "Write-Error: /src/deploy.ps1:4\nLine |\n   4 |  Write-Error \"config.json missing\"\n     |  ~~~~~~~~~~~~\n"
        "     | config.json missing\n",
        "Write-Error: /src/deploy.ps1:4",
    ),
    # a third review's: "logs" as an argument is no log printer; an echo after the refusal's epilogue
    ("kubectl create namespace logs", 'Error from server (AlreadyExists): namespaces "logs" already exists\n',
     'Error from server (AlreadyExists): namespaces "logs" already exists'),
    (
        'sudo systemctl restart app; echo "exit=$?"',
        "Job for app.service failed because the control process exited with error code.\nSee \"systemctl status"
        " app.service\" and \"journalctl -xeu app.service\" for details.\nexit=1\n",
        "Job for app.service failed because the control process exited with error code.",
    ),
]


@pytest.mark.parametrize(("command", "output", "error"), FAILURES, ids=[f[0][:30] for f in FAILURES])
def test_a_tools_failure_verdict_files_the_command_as_failed(command: str, output: str, error: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == ["(none)"]
    # A summary line's runs of blanks are one space.
    assert sections["FAILED APPROACHES"] == [f"$ {command} failed: {' '.join(error.split())}"]


# Successful outputs whose words (not their verdict) speak of failure.
SUCCESSES = [
    ("python check.py", "checked 12 files\n0 errors\n"),
    ("mypy src", "Success: no issues found in 3 source files\n"),
    ("ruff check .", "All checks passed!\n"),
    ("ruff check --fix .", "Found 2 errors (2 fixed, 0 remaining).\n"),
    ("python run_tests.py", "3 passed, 0 failed\n"),
    ("go test ./...", "ok  \texample.com/app\t0.01s\n?   \texample.com/app/cmd\t[no test files]\n"),
    ("pytest -v tests/test_checker.py", "tests/test_checker.py::test_wrong_flag PASSED\n1 passed in 0.02s\n"),
    ("pytest -q", "....\n4 passed, 1 warning in 0.10s\n"),
    ("python scan.py src", "src/ssh.py:42: raise AuthError('Permission denied (publickey).')\n"),
    ("python worker.py --once", "warning: upstream timed out; retrying\njob 17 done\n"),
    ("python client.py", "Timeout set to 30s\nconnected\n"),
    ("git pull", "Already up to date.\n"),
    ("git merge feature", "Auto-merging app.py\nMerge made by the 'ort' strategy.\n app.py | 4 ++--\n 1 file changed\n"),
    ("npx eslint src", "/app/src/a.js\n  1:7  warning  'x' is unused  no-unused-vars\n\n✖ 1 problem (0 errors, 1 warning)\n"),
    ("npx jest", "PASS src/a.test.js\nTests:       4 passed, 4 total\nSnapshots:   0 total\nRan all test suites.\n"),
    ("bundle exec rspec", "...\n\nFinished in 0.01 seconds (files took 0.1 seconds to load)\n3 examples, 0 failures\n"),
    ("curl -sIL http://example.com", "HTTP/1.1 301 Moved Permanently\nLocation: https://example.com/\n\nHTTP/2 200\n"),
    ("black .", "reformatted app.py\n\nAll done! ✨ 🍰 ✨\n1 file reformatted, 3 files left unchanged.\n"),
    ("python supervisor.py", "child 412 was Killed by OOM; restarted it\nall 4 children running\n"),
    ("./backup.sh", "backup: 12 copied, 0 failed\n"),
    ("python fetch.py", "Failed to fetch https://mirror.example/x.tar: timed out; falling back to cache\n"),
    ("submit 'flag{real}'", "Correct flag!\n"),
    ("./gradlew build", "> Task :compileJava\n> Task :test\n\nBUILD SUCCESSFUL in 3s\n4 actionable tasks: 4 executed\n"),
    ("dotnet build", "  App -> /app/bin/Debug/net8.0/App.dll\n\nBuild succeeded.\n    0 Warning(s)\n    0 Error(s)\n"),
    ("dotnet test", "Passed!  - Failed:     0, Passed:     3, Skipped:     0, Total:     3, Duration: 30 ms - Tests.dll\n"),
    ("vendor/bin/phpunit", "...                                                                 3 / 3 (100%)\n\nOK (3 tests, 3 assertions)\n"),
    ("terraform plan", "No changes. Your infrastructure matches the configuration.\n"),
    ("ansible-playbook site.yml", "PLAY RECAP ***\nweb1                       : ok=3    changed=1    unreachable=0    failed=0\n"),
    ("systemctl status nginx", "\u25cf nginx.service - web server\n     Active: failed (Result: exit-code) since Mon\n"),
    ("pytest -q; echo done", "....\n4 passed in 0.10s\ndone\n"),
    ("python deploy.py", "Get-Item: a step of the old deploy, printed by its log\nAt the end: deployed 3 services\n"),
]


@pytest.mark.parametrize(("command", "output"), SUCCESSES, ids=[s[0][:30] for s in SUCCESSES])
def test_an_output_that_only_mentions_failure_stays_a_working_recipe(command: str, output: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == [f"$ {command}"]
    assert sections["FAILED APPROACHES"] == ["(none)"]


# Successful commands whose last lines have a refusal's or a tally's shape that is not the command's verdict.
SHAPES_NOT_VERDICTS = [
    # a re-review's false failures of the second version: what a command printed of a log or a file
    ("kubectl -n ci logs job/android-build-42", "FAILURE: Build failed with an exception.\n\nBUILD FAILED in 3s\n1 actionable task\n"),
    ("docker container logs builder", "Build FAILED.\n\n    0 Warning(s)\n    1 Error(s)\n\nTime Elapsed 00:00:02.41\n"),
    ("sed -n '1,80p' artifacts/msbuild.log", "Build FAILED.\n\n    0 Warning(s)\n    1 Error(s)\n"),
    ("awk 'NR>=1' reports/phpunit.txt", "..F..    5 / 5 (100%)\n\nFAILURES!\nTests: 5, Assertions: 7, Failures: 1.\n"),
    (
        "Get-Content .\\logs\\deploy.log -Tail 4",
        "2026-12-07 10:00:01 deploying api\nInvoke-RestMethod: Response status code does not indicate success: 503.\n"
        "2026-12-07 10:00:11 retry 2/5\n2026-12-07 10:00:12 health check OK\n",
    ),
    # a third review's: a tool's own words printed by another command (read only from a command that runs the
    # tool), a log printer with options before "logs"
    ("docker exec api cat /app/logs/crash.log", "Unhandled exception. System.InvalidOperationException: no IRepo\n"
     "   at Program.<Main>$(String[] args) in /src/Program.cs:line 14\n2026-12-07 10:00:05 info: Application started.\n"),
    ("gunzip -c logs/ci-1234.log.gz | tail -40", "FAILURE: Build failed with an exception.\n\nBUILD FAILED in 12s\n"
     "3 actionable tasks: 3 executed\n"),
    ("bash ci/collect-logs.sh", "== dotnet ==\nBuild FAILED.\n\n    0 Warning(s)\n    1 Error(s)\n\nTime Elapsed 00:00:03.01\n"
     "== collected 3 logs into artifacts/ ==\n"),
    ("kubectl --context prod -n ci logs job/build-42", "Restore complete\nBuild FAILED.\n\n    0 Warning(s)\n    1 Error(s)\n"),
    ("docker compose -f docker-compose.ci.yml logs --no-log-prefix api",
     "Unhandled exception. System.InvalidOperationException: no IRepo\n   at Program.Main()\n"),
    # a fourth review's: a log printed before the tool ran, a script's "Word-Word: value" line, the tool's
    # name as an option's value
    (
        "tail -n 12 build/gradle-last.log; ./gradlew --stop",
        "FAILURE: Build failed with an exception.\n\nBUILD FAILED in 4s\n1 actionable task: 1 executed\nStopping Daemon(s)\n"
        "1 Daemon stopped\n",
    ),
    ("./publish.ps1 -Runtime win-x64", "Publishing Api...\nOutput: C:\\out\\api\nRuntime: win-x64\nSelf-Contained: true\n"),
    (
        "python scripts/ci_report.py --tool dotnet --log build.log",
        "Report of build.log (3 runs):\nrun 1: Build FAILED.\nBuild FAILED.\n    1 Error(s)\nlatest run passed\n",
    ),
    # a fifth review's: a script's own "Verb-Noun: value" line (no error's words, no "Line |" frame)
    ("pwsh -NoProfile -File ./deploy.ps1", "Deploying to staging\nPublish-Module: completed in 4.2s\n"),
    ("pwsh -File ./ci.ps1", "Get-Version: 1.4.2\n"),
    # a sixth review's: a script's status line with an error's words (a failure in a script has its frame)
    ("./scripts/smoke.ps1", "Running 42 tests\nInvoke-Tests: 42 passed, 0 failed\n"),
    ("./setup.ps1", "Test-Config: config.json does not exist, created default\n"),
    # ... a PowerShell script that went on past an error, a bare echo that prints no words
    (
        "pwsh -File .\\cleanup.ps1",
        "Removing stale artifacts...\nRemove-Item: Cannot find path 'C:\\app\\dist\\old' because it does not exist.\n"
        "Nothing to remove, continuing.\nCleanup finished.\n",
    ),
    (
        './deploy.sh; echo; echo "deploy exit=$?"',
        "Uploading release 1.4.2\ncurl: (7) Failed to connect to localhost port 8080 after 0 ms: Couldn't connect to"
        " server\nService is up after 2 attempts.\n\ndeploy exit=0\n",
    ),
    # a review's false failures of the first version of the build, cloud and Windows verdicts
    ("curl -sI http://localhost:5000/ | grep -i content-type", "Content-Type: text/html; charset=utf-8\n"),
    ("python smoke.py", "GET / 200\nCache-Control: no-store\n"),
    (
        'powershell -Command "git push origin main 2>&1"',
        "git : Everything up-to-date\nAt line:1 char:1\n+ git push origin main 2>&1\n+ ~~~~~~~~~~~~~~~~~~~~~~~~~\n"
        "    + CategoryInfo          : NotSpecified: (Everything up-to-date:String) [], RemoteException\n"
        "    + FullyQualifiedErrorId : NativeCommandError\n",
    ),
    (
        "powershell -File .\\deploy.ps1",
        "New-Item : An item with the specified name C:\\out already exists.\nAt C:\\deploy.ps1:3 char:1\n"
        "+ New-Item -ItemType Directory C:\\out\n    + FullyQualifiedErrorId : DirectoryExist\nCopied 12 files to C:\\out\n",
    ),
    (
        "git cherry-pick 9f8e7d6 && git log -1",
        "[main 4e5f6a7] Ignore a missing cache dir\ncommit 4e5f6a7b8c9d\nAuthor: Dev <dev@acme.io>\n\n"
        "    Ignore a missing cache dir\n\n    Remove-Item : Cannot find path 'C:\\app\\cache' because it does not exist.\n"
        "    At line:1 char:1\n",
    ),
    (
        "duckdb -c \"SELECT message FROM 'logs/app.parquet' LIMIT 3\"",
        "\u250c\u2500\u2500\u2510\n\u2502 message \u2502\n\u2502 Error: connection refused \u2502\n"
        "\u2502 connected to db:5432 \u2502\n\u2514\u2500\u2500\u2518\n",
    ),
    (
        "kubectl logs job/ci-build --tail=4",
        "/src/Program.cs(3,1): error CS0103: The name 'Foo' does not exist [/src/App.csproj]\n    0 Warning(s)\n"
        "    1 Error(s)\n\nTime Elapsed 00:00:03.12\n",
    ),
    (
        "dotnet build -c Release || dotnet build -c Release -p:TreatWarningsAsErrors=false",
        "/app/Program.cs(5,13): error CS0168: The variable 'e' is declared but never used [/app/App.csproj]\n\n"
        "Build FAILED.\n    1 Error(s)\n\n/app/Program.cs(5,13): warning CS0168: The variable 'e' is declared but never"
        " used [/app/App.csproj]\n  App -> /app/bin/Release/net8.0/App.dll\n\nBuild succeeded.\n    1 Warning(s)\n"
        "    0 Error(s)\n\nTime Elapsed 00:00:02.04\n",
    ),
    (
        "./deploy.sh",
        "An error occurred (BucketAlreadyOwnedByYou) when calling the CreateBucket operation: you already own it.\n"
        "upload: dist/index.html to s3://acme-site/index.html\nDeployed to https://acme-site.s3.amazonaws.com\n",
    ),
    (
        "sudo ./provision.sh",
        "Job for docker.service failed because the control process exited with error code.\nSee \"systemctl status"
        " docker.service\" for details.\nretrying in 5s\ndocker.service active\nProvisioning complete.\n",
    ),
    # a setup step refused harmlessly, a later one of the same command line went on
    (
        "docker network create appnet; docker run -d --name web --network appnet nginx",
        "Error response from daemon: network with name appnet already exists\n9d1c4f2a7e3b8c6d5e0f1a2b3c4d5e6f\n",
    ),
    (
        "kubectl create namespace staging; kubectl apply -f k8s/",
        'Error from server (AlreadyExists): namespaces "staging" already exists\ndeployment.apps/web configured\n',
    ),
    (
        "git merge feature; git checkout --theirs app.py && git add app.py && git commit -qm merged && git log --oneline -1",
        "Auto-merging app.py\nCONFLICT (content): Merge conflict in app.py\n"
        "Automatic merge failed; fix conflicts and then commit the result.\n4e5f6a7 merged\n",
    ),
    # a commit message quoting a conflict (indented: quoted text)
    (
        "git cherry-pick 1a2b3c4 && git log -1",
        "[main 4e5f6a7] Merge fix\n 1 file changed, 2 insertions(+)\ncommit 4e5f6a7\nAuthor: Dev <d@x.io>\n\n"
        "    Merge fix\n\n    CONFLICT (content): Merge conflict in app.py\n    kept both handlers\n",
    ),
    # a script's own report, not a checker's count; a script's value named E
    ("python scripts/scan_logs.py", "Found 12 errors in logs/app.log (see report.csv)\n"),
    ("python simulate.py --basis sto-3g", "converged in 9 steps\nE: -74.9420799\n"),
    # a 200 whose body quotes a status line; go's escape analysis notes
    ("curl -si localhost:8000/debug/upstream", "HTTP/1.1 200 OK\ncontent-type: text/plain\n\nlast reply:\nHTTP/1.1 404 Not Found\n"),
    ("go build -gcflags=-m ./...", "# example.com/app\n./main.go:8:6: can inline add\n./main.go:15:14: ... argument does not escape\n"),
]


@pytest.mark.parametrize(("command", "output"), SHAPES_NOT_VERDICTS, ids=[s[0][:30] for s in SHAPES_NOT_VERDICTS])
def test_a_failure_shape_that_is_not_the_commands_verdict_stays_a_working_recipe(command: str, output: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == [f"$ {command}"]
    assert sections["FAILED APPROACHES"] == ["(none)"]


# Whose words the last lines are, from the command's text: a reader prints other programs' (a log, a
# fixture, a binary's strings); a list's ("a || b", "a; b", "a & b") may be an earlier part's, got past.
NOT_THE_COMMANDS = [
    # a re-review's: shapes that count only in a command's own output, printed from a log
    ("tail -n 30 /var/log/api/stderr.log", "Unhandled exception. System.InvalidOperationException: boom\n   at Program.Main()\n"),
    ("sudo cat /var/log/api/stderr.log", "Unhandled exception. System.Exception: x\n"),
    ("cat logs/ansible.log", "web1 | FAILED | rc=1 >>\nNo such unit\n"),
    ("cat logs/tf-apply.log", "\u2577\n\u2502 Error: creating S3 Bucket (app-logs): BucketAlreadyExists\n\u2575\n"),
    ("tail -5 ci/jest.log", "Tests:       1 failed, 30 passed, 31 total\nSnapshots:   0 total\nTime:        4.1 s\n"),
    ("cat tests/fixtures/flake8.txt", "src/app.py:1:1: F401 'os' imported but unused\n"),
    ("rg -N 'error TS' tests/fixtures", "src/a.ts(3,5): error TS2322: Type 'number' is not assignable to type 'string'.\n"),
    ("grep -h '^E: ' /var/log/apt/term.log", "E: Sub-process /usr/bin/dpkg returned an error code (1)\n"),
    ("cat tests/fixtures/resp_404.http", 'HTTP/1.1 404 Not Found\nContent-Type: application/json\n\n{"detail": "Not Found"}\n'),
    ("ls challenge/", "README.md\nWrong flag!\n"),
    ("strings ./chall | grep -i flag", "Enter the flag:\nCorrect flag!\nWrong flag!\n"),
    ("cat NOTES.md", "# notes\n./main.go:10:6: undefined: buf\n"),
    ("kubectl create namespace dev || true", 'Error from server (AlreadyExists): namespaces "dev" already exists\n'),
    ("ssh -o BatchMode=yes h true || ssh -i ~/.ssh/k h 'systemctl restart app'", "h: Permission denied (publickey).\n"),
    (
        "python app.py & P=$!; sleep 2; curl -s localhost:8000/health; kill -9 $P; wait $P",
        '{"ok": true}\nbash: line 1: 4242 Killed                  python app.py\n',
    ),
    ("flake8 . --exit-zero", "./app.py:9:80: E501 line too long (130 > 79 characters)\n"),
]


@pytest.mark.parametrize(("command", "output"), NOT_THE_COMMANDS, ids=[s[0][:30] for s in NOT_THE_COMMANDS])
def test_last_lines_that_are_not_the_commands_own_are_no_verdict(command: str, output: str) -> None:
    assert error_lines(output, command=f"$ {command}") == []


@pytest.mark.parametrize(
    ("command", "output"),
    [
        # setup that prints nothing when it works makes no list; a reader's own refusal is its verdict
        ("cd web; npx tsc --noEmit --pretty false", "src/app.ts(7,3): error TS2339: Property 'foo' does not exist.\n"),
        ("strings -n 8 ./firmware.bin", "strings: './firmware.bin': No such file\n"),
    ],
)
def test_the_commands_own_last_words_stay_its_verdict(command: str, output: str) -> None:
    assert error_lines(output, command=f"$ {command}") == [(output.strip(), True)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
@pytest.mark.timeout(60)
async def test_project_memory_files_a_refused_flag_and_a_merge_conflict_as_failed(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none")) as memory:
        await memory.begin_run("Merge the feature branch, then find the flag and submit it.")
        await memory.append_many(
            [
                *_ran("git merge feature", "CONFLICT (content): Merge conflict in app.py\nAutomatic merge failed; fix conflicts and then commit the result.\n", "a"),
                *_ran("git merge --abort && git rebase main", "Successfully rebased and updated refs/heads/feature.\n", "b"),
                *_ran("submit 'flag{guess}'", "Wrong flag!\n", "c"),
            ]
        )
        await memory.commit_run("The flag was refused.")
        await memory.begin_run("Next task.", new_session=True)  # the session is summarized at rotation
        await memory.commit_run("Noted.")
        layer = memory.long_term_layer
    failed = layer.split("FAILED APPROACHES (do not repeat)\n", 1)[1].split("\n\n", 1)[0]
    recipes = layer.split("WORKING RECIPES\n", 1)[1].split("\n\n", 1)[0]
    assert failed.splitlines() == [
        "- $ git merge feature failed: Automatic merge failed; fix conflicts and then commit the result.",
        "- $ submit 'flag{guess}' failed: Wrong flag!",
    ]
    assert recipes.splitlines() == ["- $ git merge --abort && git rebase main"]


# The command's whole text decides whose words the output's last ones are (not its one-line, 240-character
# description): a list on several lines, a comment, "set -e", a "|| true" far to the right. And a bare "FAIL"
# or a failure's wording printed as data (a database's row, a JSON value, a log read back) is no verdict.
_LONG_OPTIONS = " ".join(f"--label stage{n}=ci-pipeline-{n}" for n in range(12))
STORED_TEXT_AND_WHOLE_COMMANDS = [
    ("psql -At -c 'select verdict from checks order by id desc limit 3'", "PASS\nFAIL\nPASS\n"),
    ("sqlite3 ci.db 'select result from runs order by id desc limit 1'", "FAIL\n"),
    ("redis-cli GET build:status", "FAIL\n"),
    ("curl -s localhost:9000/jobs/4 | jq -r .result", "FAIL\n"),
    ("jq -r '.[-1].text' messages.json", "npm error code E404\n"),
    ("yq '.steps[-1].log' ci.yaml", "lint: failed.\n"),
    ("journalctl -u worker -n 2 -o cat --no-pager", "Failed to start worker.service: Unit worker.service not found.\n"),
    ("python -m pytest -q\npython -m pytest -q --lf", "..F.\n1 failed, 3 passed in 0.21s\n.\n1 passed in 0.03s\n"),
    (
        "for n in 1 2 3\ndo\n  python -m pytest -q tests/test_net.py && break\ndone",
        "F.\n1 failed, 1 passed in 0.05s\n..\n2 passed in 0.04s\n",
    ),
    (
        f"docker network create {_LONG_OPTIONS} ci-net || true",
        "Error response from daemon: network with name ci-net already exists\n",
    ),
]


@pytest.mark.parametrize(
    ("command", "output"), STORED_TEXT_AND_WHOLE_COMMANDS, ids=[s[0][:30] for s in STORED_TEXT_AND_WHOLE_COMMANDS]
)
def test_stored_text_and_a_whole_commands_recovery_stay_a_working_recipe(command: str, output: str) -> None:
    sections = _session(command, output)
    assert sections["FAILED APPROACHES"] == ["(none)"]
    assert sections["WORKING RECIPES"] == [aiden_description(command)]


def aiden_description(command: str) -> str:
    """How a command is listed: its runs of blanks one space, cut at 240 characters."""
    return f"$ {clip(command, 240)}"


# The command's own last words, though its text has a ";": under set -e, in a comment, after what only prints.
WHOLE_COMMAND_FAILURES = [
    ("set -e; pip install -q -e .; python -m pytest -q", "..F\n1 failed, 2 passed in 0.12s\n"),
    ("python -m pytest -q  # fast ones; slow later", "..F\n1 failed, 2 passed in 0.12s\n"),
    ("npx jest  # CI=1; no watch", "Tests:       1 failed, 3 passed, 4 total\n"),
    ("cat pyproject.toml\npython -m pytest -q", '[tool.pytest.ini_options]\naddopts = "-q"\n..F\n1 failed, 2 passed in 0.12s\n'),
]


@pytest.mark.parametrize(("command", "output"), WHOLE_COMMAND_FAILURES, ids=[f[0][:30] for f in WHOLE_COMMAND_FAILURES])
def test_a_failure_past_a_semicolon_that_is_no_list_is_filed_as_failed(command: str, output: str) -> None:
    sections = _session(command, output)
    assert sections["WORKING RECIPES"] == ["(none)"]
    assert sections["FAILED APPROACHES"] == [f"{aiden_description(command)} failed: {' '.join(output.splitlines()[-1].split())}"]


def _code_run(code: str, output: str) -> dict[str, list[str]]:
    events = [
        SessionEvent(type="user_input", content="Run the tests."),
        SessionEvent(type="tool_call", tool_name="execute_python", tool_call_id="k1", tool_args=json.dumps({"code": code})),
        SessionEvent(type="tool_result", tool_name="execute_python", tool_call_id="k1", content=output),
    ]
    return session_sections(events, BUDGET)


def test_code_run_is_no_shell_list_and_its_printed_data_no_verdict() -> None:
    # Python's ";" separates statements, not commands: the tally is the run's own.
    code = "import subprocess; subprocess.run(['pytest', '-q'])"
    assert _code_run(code, "..F\n1 failed, 2 passed in 0.10s\n")["FAILED APPROACHES"] == [
        f"execute_python(code={code}) failed: 1 failed, 2 passed in 0.10s"
    ]
    assert _code_run("print(db.last_status())", "FAIL\n")["FAILED APPROACHES"] == ["(none)"]


def test_go_tests_closing_fail_files_the_failed_package_however_many_passed_after_it() -> None:
    output = "--- FAIL: TestAdd (0.00s)\n    add_test.go:9: got 3, want 4\nFAIL\nFAIL\texample.com/m/calc\t0.002s\n"
    output += "".join(f"ok  \texample.com/m/p{n}\t0.001s\n" for n in range(6)) + "FAIL\n"
    assert _session("go test ./...", output)["FAILED APPROACHES"] == ["$ go test ./... failed: FAIL example.com/m/calc 0.002s"]
    # a bare FAIL with no failed package above it is some program's data
    assert _session("python report.py", "suite a\nPASS\nsuite b\nFAIL\n")["FAILED APPROACHES"] == ["(none)"]
