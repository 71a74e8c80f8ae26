#!/usr/bin/env python3
# dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
# The structural check of issue 28 ("one file per concern"): it keeps three size rules true
# for the library (include/), the compiled-mode sources (src/) and the dlqctl tool
# (examples/dlqctl/), and prints every offender as `file:line: what (length)`:
#
#   1. No header under include/ is over 700 lines, unless its opening comment says it is
#      generated (a line starting `// generated` or `// Generated`, case-insensitive).
#   2. No hand-written function is over 80 lines (generated files are not hand-written).
#   3. Every file opens with a comment that states its concern: after the licence line (and
#      a Doxygen `@file name`) the opening comment must say something (at least four words).
#      Whether the words name ONE concern is for reviewers; the check only keeps it there.
#
# How a function is measured. A function is every brace-enclosed body that is not nested
# inside another function body: free functions, member functions defined in or out of their
# class, constructors (an initializer list is part of the head, not the body), operators,
# and lambdas at namespace or class scope (a variable initialised with a lambda). Its length
# is the number of physical lines from the line of its opening brace to the line of its
# closing brace, inclusive: blank lines and comments inside count, as they do for a reader.
# Everything nested inside a body counts towards that body — lambdas, local classes and
# their member functions, string literals — so wrapping part of a long function in a lambda
# does not make it shorter, and a function that returns a 300-line raw string is a 300-line
# function. Class bodies, namespaces, enums and brace initialisers are not functions (a long
# class that only declares is fine; its file still obeys rule 1).
#
# Why a scanner and not clang-tidy's readability-function-size: clang-tidy must parse every
# header with all its dependencies (hiredis, SQLite, Asio, cpp-httplib, CLI11) in each
# configuration, which costs minutes of both cores and only sees the headers a configuration
# has; this scanner reads the source text of all of them in well under a second, in every
# configuration, with no compiler. It is a lexer that knows C++'s comments, string and
# character literals (with prefixes and escapes), raw string literals with any delimiter,
# digit separators and preprocessor lines, plus a brace matcher that classifies each `{` at
# namespace or class scope from the tokens before it. Where it cannot classify a file (its
# braces do not balance, for example because of braces split across `#if` branches) it
# reports that as an offence, so the check never passes by not looking.
# tests/structure/test_check_structure.py tests the scanner on the hard cases.

import argparse
import os
import re
import sys

HEADER_MAX_LINES = 700
FUNCTION_MAX_LINES = 80
CONCERN_MIN_WORDS = 4

# The trees the rules apply to, relative to the repository root.
HEADER_TREES = ["include"]
SOURCE_TREES = ["include", "src", "examples/dlqctl"]
SOURCE_SUFFIXES = (".hpp", ".h", ".cpp", ".cc", ".ipp")

GENERATED_RE = re.compile(r"^\s*//\s*@?generated\b", re.IGNORECASE)
LICENCE_RE = re.compile(r"MIT licen[cs]e", re.IGNORECASE)

# ---------------------------------------------------------------------------------------------
# Lexer


class Token:
    __slots__ = ("kind", "text", "line", "end_line")

    def __init__(self, kind, text, line, end_line=None):
        self.kind = kind  # "id", "num", "str", "chr", "punct"
        self.text = text
        self.line = line
        self.end_line = line if end_line is None else end_line

    def __repr__(self):
        return "Token(%s, %r, %d)" % (self.kind, self.text, self.line)


class ScanError(Exception):
    def __init__(self, line, message):
        super().__init__(message)
        self.line = line
        self.message = message


_PUNCT3 = ("<<=", ">>=", "...", "->*", "<=>")
_PUNCT2 = ("::", "->", "++", "--", "<<", ">>", "<=", ">=", "==", "!=", "&&", "||", "+=",
           "-=", "*=", "/=", "%=", "&=", "|=", "^=", ".*", "##")
_STRING_PREFIX_RE = re.compile(r"(u8|u|U|L)?R?\Z")


def tokenize(text):
    """The tokens of a C++ source text, without comments and preprocessor lines."""
    tokens = []
    i, n, line = 0, len(text), 1
    at_line_start = True  # only whitespace since the last newline
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
            at_line_start = True
            continue
        if c in " \t\r\f\v":
            i += 1
            continue
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":  # line splice outside a directive
            i += 2
            line += 1
            continue
        if c == "#" and at_line_start:  # a preprocessor directive, to its unspliced end
            while i < n and text[i] != "\n":
                if text[i] == "/" and text.startswith("/*", i):
                    end = text.find("*/", i + 2)
                    if end < 0:
                        raise ScanError(line, "unterminated /* comment")
                    line += text.count("\n", i, end)
                    i = end + 2
                    continue
                if text[i] == "/" and text.startswith("//", i):
                    while i < n and text[i] != "\n":
                        i += 1
                    break
                if text[i] == "\\" and i + 1 < n and text[i + 1] in "\r\n":
                    i += 2 if text[i + 1] == "\n" else 3
                    line += 1
                    continue
                i += 1
            continue
        at_line_start = False
        if text.startswith("//", i):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise ScanError(line, "unterminated /* comment")
            line += text.count("\n", i, end)
            i = end + 2
            continue
        if c.isalpha() or c == "_":
            j = i + 1
            while j < n and (text[j].isalnum() or text[j] == "_"):
                j += 1
            word = text[i:j]
            if j < n and text[j] in "\"'" and _STRING_PREFIX_RE.match(word):
                i = _literal(text, j, word, line, tokens)
                line = tokens[-1].end_line
                continue
            tokens.append(Token("id", word, line))
            i = j
            continue
        if c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit()):
            j = i + 1
            while j < n:
                d = text[j]
                if d.isalnum() or d in "._":
                    j += 1
                elif d == "'" and j + 1 < n and text[j + 1].isalnum():  # digit separator
                    j += 1
                elif d in "+-" and text[j - 1] in "eEpP":
                    j += 1
                else:
                    break
            tokens.append(Token("num", text[i:j], line))
            i = j
            continue
        if c in "\"'":
            i = _literal(text, i, "", line, tokens)
            line = tokens[-1].end_line
            continue
        for p in _PUNCT3 + _PUNCT2:
            if text.startswith(p, i):
                tokens.append(Token("punct", p, line))
                i += len(p)
                break
        else:
            tokens.append(Token("punct", c, line))
            i += 1
    return tokens


def _literal(text, quote, prefix, line, tokens):
    """Appends the string or character literal whose quote is at `quote`; returns its end."""
    n = len(text)
    if prefix.endswith("R") and text[quote] == '"':
        open_paren = text.find("(", quote + 1)
        if open_paren < 0 or open_paren - quote - 1 > 16:
            raise ScanError(line, "malformed raw string literal")
        delimiter = text[quote + 1:open_paren]
        closing = ")" + delimiter + '"'
        end = text.find(closing, open_paren + 1)
        if end < 0:
            raise ScanError(line, "unterminated raw string literal")
        end += len(closing)
        tokens.append(Token("str", text[quote:end], line, line + text.count("\n", quote, end)))
        return end
    q = text[quote]
    j = quote + 1
    while j < n and text[j] != q:
        if text[j] == "\\":
            j += 1
        elif text[j] == "\n":
            raise ScanError(line, "unterminated %s literal" % ("string" if q == '"' else "character"))
        j += 1
    if j >= n:
        raise ScanError(line, "unterminated literal")
    tokens.append(Token("str" if q == '"' else "chr", text[quote:j + 1], line))
    return j + 1


# ---------------------------------------------------------------------------------------------
# Brace classification and function bodies

_QUALIFIERS = {"const", "volatile", "noexcept", "override", "final", "mutable", "&", "&&",
               "constexpr", "try"}
_GROUP_KEYWORDS = {"noexcept", "throw", "decltype", "requires", "alignas", "__attribute__"}
_CLASS_KEYWORDS = {"class", "struct", "union"}


class Function:
    def __init__(self, name, line, first, last):
        self.name = name  # best-effort name, e.g. "DeadLetterQueue::replay" or "<lambda>"
        self.line = line  # the line of the name (or the lambda's introducer)
        self.first = first  # the line of the opening brace
        self.last = last  # the line of the closing brace

    @property
    def length(self):
        return self.last - self.first + 1


def _depth0_groups(head):
    """(open, close) index pairs of the ()/[] groups at depth 0 of `head`; None if unbalanced."""
    groups, stack = [], []
    for k, t in enumerate(head):
        if t.kind != "punct":
            continue
        if t.text in "([":
            stack.append((t.text, k))
        elif t.text in ")]":
            if not stack:
                return None
            opener, start = stack.pop()
            if (opener, t.text) not in (("(", ")"), ("[", "]")):
                return None
            if not stack:
                groups.append((start, k))
    return groups


def _name_before(head, k):
    """The (qualified) name that ends just before index k of head, and its line."""
    parts = []
    j = k - 1
    if j >= 2 and head[j].text == ")" and head[j - 1].text == "(" and head[j - 2].text == "operator":
        parts, j = ["()", "operator"], j - 3
    elif j >= 1 and head[j - 1].text == "operator":
        parts, j = [head[j].text, "operator"], j - 2
    elif j >= 0 and head[j].text == ">":  # f<T>(...): a specialisation's arguments
        depth = 0
        while j >= 0:
            depth += {">": 1, ">>": 2, "<": -1}.get(head[j].text, 0)
            j -= 1
            if depth <= 0:
                break
    if not parts:
        if j < 0 or head[j].kind != "id":
            return None, head[k].line
        parts.append(head[j].text)
        j -= 1
    while j >= 0 and (head[j].text == "~" or (j >= 1 and head[j].text == "::"
                                               and head[j - 1].kind == "id")):
        if head[j].text == "~":
            parts.append("~")
            j -= 1
        else:
            parts.extend(["::", head[j - 1].text])
            j -= 2
    if not parts:
        return None, head[k].line
    parts.reverse()
    name = ""
    for p in parts:
        if name and name[-1].isalnum() and (p[0].isalnum() or p[0] == "_"):
            name += " "
        name += p
    return name, head[j + 1].line


def _declarator_suffix_end(tail):
    """The index of the first token of tail that is not a qualifier, noexcept(…) or similar
    group, or [[attribute]]: what may stand between a parameter list and `{`, `:` or `->`."""
    k = 0
    while k < len(tail):
        t = tail[k]
        if t.text in _GROUP_KEYWORDS and k + 1 < len(tail) and tail[k + 1].text == "(":
            depth, k = 0, k + 1
            while k < len(tail):
                depth += {"(": 1, ")": -1}.get(tail[k].text, 0)
                k += 1
                if depth == 0:
                    break
        elif t.text == "[" and k + 1 < len(tail) and tail[k + 1].text == "[":
            while k + 1 < len(tail) and not (tail[k].text == "]" and tail[k + 1].text == "]"):
                k += 1
            k += 2
        elif t.text in _QUALIFIERS:
            k += 1
        else:
            break
    return k


def _parameter_lists(head, groups):
    """The () groups at depth 0 that can be a parameter list (not noexcept(…), decltype(…) …)."""
    return [(a, b) for (a, b) in groups
            if head[a].text == "(" and not (a > 0 and head[a - 1].text in _GROUP_KEYWORDS)]


def classify(head):
    """What the `{` that follows `head` opens, at namespace or class scope.

    Returns ("function", name, line), ("namespace",), ("class",) or ("other",)."""
    if not head:
        return ("other",)
    if head[0].text == "namespace" or (len(head) >= 2 and head[0].text == "inline"
                                         and head[1].text == "namespace"):
        return ("namespace",)
    if head[0].text == "extern" and len(head) == 2 and head[1].kind == "str":
        return ("namespace",)
    groups = _depth0_groups(head)
    if groups is None:
        return ("other",)
    # A lambda at namespace or class scope: `auto f = [captures](params) specifiers {`.
    for (a, b) in groups:
        if head[a].text != "[" or (a + 1 < len(head) and head[a + 1].text == "["):
            continue
        if a > 0 and head[a - 1].text in ("=", "(", ",", "return"):
            tail = head[b + 1:]
            if not tail or tail[0].text == "(" or tail[0].text in _QUALIFIERS or tail[0].text == "->":
                return ("function", "<lambda>", head[a].line)
    # A function: `… name(params) qualifiers [-> type | : initializers] {`.
    for (a, b) in _parameter_lists(head, groups):
        if _is_function_tail(head[b + 1:], head[-1]):
            name, line = _name_before(head, a)
            if name is not None:
                return ("function", name, line)
    if any(t.kind == "id" and t.text in _CLASS_KEYWORDS for t in head):
        return ("class",)
    return ("other",)


def _is_function_tail(tail, last):
    """Whether the tokens between a parameter list and `{` end a function's declarator."""
    k = _declarator_suffix_end(tail)
    if k >= len(tail):
        return True
    if tail[k].text == "->":  # a trailing return type: anything up to the brace
        return True
    if tail[k].text == ":":  # a constructor's initializer list ends with ) or } before the body
        return last.text in (")", "}")
    return False


def _in_initializer_list(head):
    """Whether head is `… (params) [qualifiers] : member(…), member` (a `{` here initialises
    a member or base, it does not open the body)."""
    if not head or not (head[-1].kind == "id" or head[-1].text in (">", ">>")):
        return False
    groups = _depth0_groups(head)
    if groups is None:
        return False
    for (a, b) in _parameter_lists(head, groups):
        tail = head[b + 1:]
        k = _declarator_suffix_end(tail)
        if k < len(tail) and tail[k].text == ":":
            return True
    return False


class Scope:
    __slots__ = ("kind", "function", "head")

    def __init__(self, kind, function=None):
        self.kind = kind  # "namespace", "class", "function", "other"
        self.function = function
        self.head = []  # tokens since the last boundary (namespace and class scopes)


def functions(tokens):
    """The functions of a token stream (see the header for what counts as one)."""
    found = []
    stack = [Scope("namespace")]
    for t in tokens:
        top = stack[-1]
        text = t.text if t.kind == "punct" else None
        if text == "{":
            if top.kind in ("function", "other") or _inside_parens(top.head):
                stack.append(Scope("other"))
                if top.kind in ("namespace", "class"):
                    top.head.append(t)
                continue
            if _in_initializer_list(top.head):  # a member's brace initialiser: part of the head
                stack.append(Scope("init"))
                top.head.append(t)
                continue
            kind = classify(top.head)
            if kind[0] == "function":
                stack.append(Scope("function", Function(kind[1], kind[2], t.line, t.line)))
            elif kind[0] in ("namespace", "class"):
                stack.append(Scope(kind[0]))
            else:
                stack.append(Scope("other"))
                top.head.append(t)  # `int x{1};`: the statement goes on
                continue
            top.head = []
            continue
        if text == "}":
            if len(stack) == 1:
                raise ScanError(t.line, "a '}' closes nothing (braces split across #if branches?)")
            closed = stack.pop()
            parent = stack[-1]
            if closed.kind == "function":
                closed.function.last = t.line
                found.append(closed.function)
            if parent.kind in ("namespace", "class"):
                if closed.kind in ("other", "init"):
                    parent.head.append(t)
                else:
                    parent.head = []
            continue
        if top.kind in ("namespace", "class"):
            if text == ";":
                top.head = []
            elif text == ":" and len(top.head) == 1 and top.head[0].text in (
                    "public", "private", "protected"):
                top.head = []
            else:
                top.head.append(t)
    if len(stack) != 1:
        raise ScanError(tokens[-1].line if tokens else 1,
                        "%d unclosed '{' at the end of the file" % (len(stack) - 1))
    return found


def _inside_parens(head):
    depth = 0
    for t in head:
        if t.kind == "punct":
            if t.text in "([":
                depth += 1
            elif t.text in ")]":
                depth -= 1
    return depth > 0


# ---------------------------------------------------------------------------------------------
# The opening comment


def opening_comment(text):
    """The lines of the file's first comment block (// lines or one /* */), or None."""
    lines = text.splitlines()
    k = 0
    while k < len(lines) and not lines[k].strip():
        k += 1
    if k == len(lines):
        return None
    first = lines[k].strip()
    if first.startswith("/*"):
        block = []
        for line in lines[k:]:
            block.append(line)
            if "*/" in line:
                return block
        return block
    if not first.startswith("//"):
        return None
    block = []
    for line in lines[k:]:
        if not line.strip().startswith("//"):
            break
        block.append(line)
    return block


def is_generated(comment):
    return bool(comment) and any(GENERATED_RE.match(line) for line in comment)


def concern_words(comment):
    """The words of the opening comment that state the file's concern."""
    words = []
    for line in comment or []:
        body = re.sub(r"^\s*(/\*+|\*+/|\*|//+!?|/)", "", line).replace("*/", "")
        if LICENCE_RE.search(body):
            continue
        body = re.sub(r"[@\\]file\s+\S+", "", body)
        words.extend(w for w in re.findall(r"[A-Za-z][A-Za-z'-]*", body))
    return words


# ---------------------------------------------------------------------------------------------
# The check


class Offence:
    def __init__(self, path, line, what):
        self.path, self.line, self.what = path, line, what

    def __str__(self):
        return "%s:%d: %s" % (self.path, self.line, self.what)


def check_file(path, text, is_header_tree):
    offences = []
    comment = opening_comment(text)
    generated = is_generated(comment)
    n_lines = text.count("\n") + (0 if text.endswith("\n") or not text else 1)
    if is_header_tree and not generated and n_lines > HEADER_MAX_LINES:
        offences.append(Offence(path, 1, "header of %d lines (at most %d unless generated)"
                                % (n_lines, HEADER_MAX_LINES)))
    if len(concern_words(comment)) < CONCERN_MIN_WORDS:
        offences.append(Offence(path, 1, "no opening comment that states the file's concern"))
    if generated:
        return offences
    try:
        for f in functions(tokenize(text)):
            if f.length > FUNCTION_MAX_LINES:
                offences.append(Offence(path, f.line, "function %s of %d lines (at most %d)"
                                        % (f.name, f.length, FUNCTION_MAX_LINES)))
    except ScanError as e:
        offences.append(Offence(path, e.line, "cannot scan: %s" % e.message))
    return offences


def source_files(root):
    for tree in SOURCE_TREES:
        base = os.path.join(root, tree)
        for directory, subdirs, files in os.walk(base):
            subdirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_SUFFIXES):
                    yield os.path.relpath(os.path.join(directory, name), root)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."),
                        help="the repository root (default: two levels above this script)")
    parser.add_argument("--list", action="store_true",
                        help="also print every function with its length, longest first")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    offences, checked, all_functions = [], 0, []
    for rel in source_files(root):
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            text = f.read()
        header_tree = any(rel.startswith(tree + os.sep) for tree in HEADER_TREES) and \
            rel.endswith((".hpp", ".h", ".ipp"))
        offences.extend(check_file(rel, text, header_tree))
        checked += 1
        if args.list:
            try:
                all_functions.extend((f.length, rel, f.line, f.name)
                                     for f in functions(tokenize(text)))
            except ScanError:
                pass
    if args.list:
        for length, rel, line, name in sorted(all_functions, reverse=True):
            print("%5d  %s:%d  %s" % (length, rel, line, name))
    if not checked:
        print("check_structure: no source files under %s (wrong --root?)" % root)
        return 2
    for o in offences:
        print(o)
    print("check_structure: %d files, %d offences (headers <= %d lines unless generated, "
          "functions <= %d lines, an opening comment stating each file's concern)"
          % (checked, len(offences), HEADER_MAX_LINES, FUNCTION_MAX_LINES))
    return 1 if offences else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
