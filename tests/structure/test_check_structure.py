#!/usr/bin/env python3
# dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.
# Tests of the structural check (check_structure.py) on the cases a brace counter gets wrong:
# braces in comments, strings, raw strings and character literals; lambdas; constructors'
# initializer lists; long class bodies; generated files; files it cannot scan.

import io
import os
import sys
import tempfile
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_structure as cs  # noqa: E402

LICENCE = "// dlq — dead-letter queues for C++ services. MIT licence, see LICENSE.\n"
CONCERN = "/// @file x.hpp\n/// The one concern of this test file, stated.\n#pragma once\n"


def body(n):
    """n lines of statements."""
    return "".join("  x += %d;\n" % k for k in range(n))


def function_of(lines, head="inline void f(int& x)"):
    """A function whose braces span exactly `lines` lines."""
    return head + " {\n" + body(lines - 2) + "}\n"


def scan(text):
    return [(f.name, f.length) for f in cs.functions(cs.tokenize(text))]


class FunctionLength(unittest.TestCase):
    def test_a_function_is_measured_from_its_opening_to_its_closing_brace(self):
        self.assertEqual(scan(function_of(80)), [("f", 80)])
        self.assertEqual(scan("int g() { return 1; }\n"), [("g", 1)])

    def test_80_lines_pass_and_81_fail(self):
        ok = cs.check_file("include/a.hpp", LICENCE + CONCERN + function_of(80), True)
        self.assertEqual([str(o) for o in ok], [])
        bad = cs.check_file("include/a.hpp", LICENCE + CONCERN + function_of(81), True)
        self.assertEqual([str(o) for o in bad],
                         ["include/a.hpp:5: function f of 81 lines (at most 80)"])

    def test_braces_in_comments_and_literals_are_not_braces(self):
        text = (
            "void f() {\n"
            "  // } a comment {\n"
            "  /* } { */ s = \"}\\\"{\"; c = '}'; d = '\\'';\n"
            "  r = R\"x(\n"
            "  } )\" {\n"
            ")x\"; n = 1'000'000;\n"
            "  u = u8R\"(})\"; w = L'{';\n"
            "}\n"
            "void g() {}\n")
        self.assertEqual(scan(text), [("f", 8), ("g", 1)])

    def test_preprocessor_lines_are_skipped_with_their_continuations(self):
        text = ("#define OPEN {\\\n  }\n"
                "#if 0 // {\n#endif\n"
                "void f() {\n}\n")
        self.assertEqual(scan(text), [("f", 2)])

    def test_lambdas_and_local_classes_count_towards_their_function(self):
        text = ("void f() {\n"
                "  auto g = [&](int y) {\n    return y;\n  };\n"
                "  struct Local { void m() {\n  } };\n"
                "}\n")
        self.assertEqual(scan(text), [("f", 7)])

    def test_a_lambda_at_namespace_or_class_scope_is_a_function(self):
        text = ("namespace a {\ninline const auto f = [](int x) {\n  return x;\n};\n"
                "struct S {\n  static constexpr auto g = [] {\n    return 1;\n  };\n};\n}\n")
        self.assertEqual(scan(text), [("<lambda>", 3), ("<lambda>", 3)])

    def test_a_constructor_is_measured_from_its_body_not_its_initializer_list(self):
        text = ("struct S : Base<T> {\n"
                "  S(int a) noexcept\n      : Base{a},\n        a_(a),\n        b_{{1, 2}} {\n"
                "    go();\n  }\n"
                "  int a_{0};\n  std::vector<int> b_{};\n"
                "};\n")
        self.assertEqual(scan(text), [("S", 3)])

    def test_members_operators_and_qualified_definitions_are_named(self):
        text = ("template <class T> class Q {\n public:\n"
                "  bool operator()(int) const { return true; }\n"
                "  bool operator==(const Q&) const noexcept(true) { return true; }\n"
                "  auto size() const -> std::size_t {\n    return 0;\n  }\n"
                "  ~Q() {}\n"
                "};\n"
                "template <class T> DLQ_INLINE void Q<T>::run(int x) & {\n}\n"
                "inline std::function<void()> make() { return [] {}; }\n")
        self.assertEqual(scan(text), [("operator()", 1), ("operator==", 1), ("size", 3),
                                      ("~Q", 1), ("run", 2), ("make", 1)])

    def test_class_bodies_namespaces_enums_and_initializers_are_not_functions(self):
        text = ("namespace a { namespace b {\nextern \"C\" {\n}\n"
                "struct Big {\n" + "  int m;\n" * 200 + "};\n"
                "enum class E : int {\n  x,\n  y\n};\n"
                "const int table[] = {\n" + "  1,\n" * 100 + "};\n"
                "Point p{1, 2};\nstd::map<int, int> m = {{1, 2}};\n"
                "}}\n")
        self.assertEqual(scan(text), [])

    def test_a_function_returning_a_long_raw_string_is_that_long(self):
        text = 'inline const char* page() {\n  return R"(\n' + "<p>{}</p>\n" * 90 + ')";\n}\n'
        self.assertEqual(scan(text), [("page", 94)])

    def test_braces_split_across_if_branches_are_an_offence_not_a_pass(self):
        text = LICENCE + CONCERN + "#if A\nvoid f() {\n#else\nvoid f(int) {\n#endif\n}\n"
        offences = [str(o) for o in cs.check_file("src/a.cpp", text, False)]
        self.assertEqual(len(offences), 1)
        self.assertIn("cannot scan", offences[0])
        with self.assertRaises(cs.ScanError):
            cs.tokenize('const char* s = "unterminated;\n')


class HeaderLengthAndOpeningComment(unittest.TestCase):
    def header(self, lines, banner=""):
        text = LICENCE + banner + CONCERN
        return text + "\n" * (lines - text.count("\n"))

    def test_a_header_of_701_lines_fails_unless_it_says_it_is_generated(self):
        self.assertEqual(cs.check_file("include/a.hpp", self.header(700), True), [])
        self.assertEqual([str(o) for o in cs.check_file("include/a.hpp", self.header(701), True)],
                         ["include/a.hpp:1: header of 701 lines (at most 700 unless generated)"])
        generated = self.header(900, "// Generated by scripts/embed.py from page.js: do not edit.\n")
        self.assertEqual(cs.check_file("include/a.hpp", generated, True), [])

    def test_a_generated_file_has_no_hand_written_functions_to_measure(self):
        text = LICENCE + "// generated from page.html\n" + CONCERN + function_of(300)
        self.assertEqual(cs.check_file("include/a.hpp", text, True), [])

    def test_the_length_rule_is_for_headers_under_include(self):
        self.assertEqual(cs.check_file("examples/dlqctl/a.hpp", self.header(900), False), [])

    def test_every_file_opens_with_a_comment_that_states_its_concern(self):
        missing = "#pragma once\nint x;\n"
        licence_only = LICENCE + "#pragma once\n"
        file_only = LICENCE + "/// @file a.hpp\n#pragma once\n"
        block = "/* The one concern of a block comment. */\n#pragma once\n"
        for text in (missing, licence_only, file_only):
            self.assertEqual([str(o) for o in cs.check_file("src/a.cpp", text, False)],
                             ["src/a.cpp:1: no opening comment that states the file's concern"])
        self.assertEqual(cs.check_file("src/a.cpp", block, False), [])
        self.assertEqual(cs.check_file("src/a.cpp", LICENCE + CONCERN, False), [])


class WholeTree(unittest.TestCase):
    def run_main(self, files):
        with tempfile.TemporaryDirectory() as root:
            for rel, text in files.items():
                os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
                with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
                    f.write(text)
            out = io.StringIO()
            with redirect_stdout(out):
                status = cs.main(["--root", root])
            return status, out.getvalue()

    def test_every_offender_is_printed_and_the_check_fails(self):
        status, out = self.run_main({
            "include/dlq/a.hpp": LICENCE + CONCERN + function_of(81),
            "src/b.cpp": "int y;\n",
            "examples/dlqctl/c.hpp": LICENCE + CONCERN + "\n" * 800 + function_of(90, "int g()"),
            "tests/d.cpp": function_of(500),  # not a tree the rules cover
        })
        self.assertEqual(status, 1)
        self.assertIn("include/dlq/a.hpp:5: function f of 81 lines (at most 80)", out)
        self.assertIn("src/b.cpp:1: no opening comment that states the file's concern", out)
        self.assertIn("examples/dlqctl/c.hpp:805: function g of 90 lines (at most 80)", out)
        self.assertNotIn("tests/d.cpp", out)
        self.assertIn("3 offences", out)

    def test_a_clean_tree_passes_and_an_empty_one_is_an_error(self):
        self.assertEqual(self.run_main({"src/a.cpp": LICENCE + CONCERN + function_of(80)})[0], 0)
        self.assertEqual(self.run_main({"README.md": "x"})[0], 2)


if __name__ == "__main__":
    unittest.main()
