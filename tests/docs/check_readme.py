#!/usr/bin/env python3
"""Checks that every code block of README.md is true: each block carries a marker comment
on the line before its fence that says how it is checked, and this script checks it.

  <!-- readme-check: excerpt FILE -->     the block's lines appear in FILE, in order (compared
                                          without leading and trailing blanks); FILE is built
                                          and run by the tests (the examples run under ctest,
                                          the consumer projects build against an install)
  <!-- readme-check: tested-by FILE... --> the commands are run by those files' tests; every
                                          FILE and every scripts/... it names exists, and every
                                          -DDLQ_... option is one CMakeLists.txt declares
  (and every relative link in README.md and docs/*.md names a file and heading that exist)
  <!-- readme-check: run -->              a shell block: run line by line with bash in a
                                          temporary directory holding a seeded store, with
                                          dlqctl on PATH; every line must exit 0

  check_readme.py [--root DIR] [--dlqctl PATH]    (without --dlqctl, `run` blocks are skipped
                                                   with a note: ctest always passes it)
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

MARK = re.compile(r"<!--\s*readme-check:\s*(\S+)\s*(.*?)\s*-->")


def blocks(text):
    """(marker line or None, language, body lines, line number of the fence)."""
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        m = re.match(r"^```(\w*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        start = i
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        k = start - 1
        while k >= 0 and not lines[k].strip():
            k -= 1
        marker = lines[k] if k >= 0 and MARK.search(lines[k]) else None
        yield marker, m.group(1), lines[start + 1:j], start + 1
        i = j + 1


def check_excerpt(root, path, body):
    full = os.path.join(root, path)
    if not os.path.isfile(full):
        return [f"{path} does not exist"]
    source = [line.strip() for line in open(full, encoding="utf-8").read().split("\n")]
    at = 0
    for line in body:
        want = line.strip()
        if not want or want in ("// …", "…"):
            continue
        try:
            at = source.index(want, at) + 1
        except ValueError:
            return [f"line not found in {path} (in order): {want!r}"]
    return []


def check_tested_by(root, files, body):
    problems = []
    for f in files:
        if not os.path.exists(os.path.join(root, f)):
            problems.append(f"tested-by file {f} does not exist")
    text = "\n".join(body)
    for script in re.findall(r"(scripts/[\w.-]+)", text):
        if not os.access(os.path.join(root, script), os.X_OK):
            problems.append(f"{script} is not an executable file")
    cmake = open(os.path.join(root, "CMakeLists.txt"), encoding="utf-8").read()
    for option in re.findall(r"-D(DLQ_\w+)=", text):
        if not re.search(r"option\(\s*" + option + r"\b", cmake):
            problems.append(f"-D{option} is not an option of CMakeLists.txt")
    return problems


def seed(dlqctl, env, cwd):
    """A store with a few dead letters in 'orders'; returns the id of one."""
    ids = []
    for error, kind, payload in [("payment gateway timeout", "TimeoutError", '{"order":1}'),
                                 ("amount must be positive", "ValidationError", '{"order":2}'),
                                 ("payment gateway timeout", "TimeoutError", '{"order":3}')]:
        out = subprocess.run([dlqctl, "send", "orders", "--error", error, "--error-type", kind,
                              "--attempt", "3"], input=payload.encode(), env=env, cwd=cwd,
                             capture_output=True, timeout=60)
        if out.returncode != 0:
            raise SystemExit(f"seeding failed: {out.stderr.decode()}")
        ids.append(out.stdout.decode().split()[-1])
    return ids[1]


def run_block(dlqctl, body):
    problems = []
    with tempfile.TemporaryDirectory(prefix="dlq-readme-") as tmp:
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(os.path.abspath(dlqctl)) + os.pathsep + env["PATH"]
        env["PWD"] = tmp
        env["DLQ_STORE"] = "sqlite://" + os.path.join(tmp, "dlq.db")
        env["ID"] = seed(dlqctl, env, tmp)
        # One bash runs the block as written; the ERR trap names the line that failed.
        script = "set -eE\ntrap 'echo \"readme-check: failed: $BASH_COMMAND\" >&2' ERR\n"
        out = subprocess.run(["bash", "-c", script + "\n".join(body)], env=env, cwd=tmp,
                             capture_output=True, timeout=600)
        if out.returncode != 0:
            problems.append(f"exit {out.returncode}:\n{out.stderr.decode().strip()}")
    return problems


def anchors(path):
    """GitHub's anchors of a markdown file's headings."""
    out = set()
    in_code = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            in_code = not in_code
        m = None if in_code else re.match(r"^#+\s+(.*)$", line.rstrip())
        if m:
            a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
            out.add(a)
    return out


def check_links(root):
    """Every relative link of README.md and docs/*.md names a file (and heading) that exists."""
    problems = []
    pages = ["README.md"] + ["docs/" + f for f in sorted(os.listdir(os.path.join(root, "docs")))
                             if f.endswith(".md")]
    for page in pages:
        base = os.path.dirname(os.path.join(root, page))
        text = open(os.path.join(root, page), encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else os.path.join(root, page)
            if not os.path.exists(full):
                problems.append(f"{page}: link to {target}: no such file")
            elif anchor and full.endswith(".md") and anchor not in anchors(full):
                problems.append(f"{page}: link to {target}: no such heading")
    return problems


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    parser.add_argument("--dlqctl")
    args = parser.parse_args()
    root = os.path.abspath(args.root)
    readme = open(os.path.join(root, "README.md"), encoding="utf-8").read()
    failures = []
    limit = 300
    if readme.count("\n") > limit:
        failures.append(f"README.md has {readme.count(chr(10))} lines; the limit is {limit}")
    checked = 0
    for marker, lang, body, line in blocks(readme):
        where = f"README.md:{line} ({lang or 'text'})"
        if marker is None:
            failures.append(f"{where}: no <!-- readme-check: … --> marker before the block")
            continue
        kind, rest = MARK.search(marker).groups()
        if kind == "excerpt":
            problems = check_excerpt(root, rest, body)
        elif kind == "tested-by":
            problems = check_tested_by(root, rest.split(), body)
        elif kind == "run":
            if lang != "sh":
                problems = ["`run` is for sh blocks"]
            elif not args.dlqctl:
                print(f"{where}: skipped (no --dlqctl)")
                problems = []
            else:
                problems = run_block(args.dlqctl, body)
        else:
            problems = [f"unknown readme-check kind '{kind}'"]
        failures += [f"{where}: {p}" for p in problems]
        checked += 1
    failures += check_links(root)
    for f in failures:
        print(f)
    print(f"check_readme: {checked} blocks, {len(failures)} problems")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
