// Turns every ```cpp block of README.md into a GoogleTest case, so the README's code is
// compiled and run by `make test` and cannot rot. Blocks share the README's first lines
// (`#include <kiln/kiln.h>`, `using namespace kiln;`). In a block, `#include` lines go to the
// top of the file, everything else runs inside the test, and comment lines of the form
// `// > text` are the output the block must print on std::cout (compared exactly).
// Usage: readme_extract README.md OUT.cpp
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: readme_extract README.md OUT.cpp\n";
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    std::cerr << "readme_extract: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::string includes, tests, line;
  int line_no = 0, blocks = 0;
  bool inside = false;
  std::string body, expected;
  auto trim_left = [](const std::string& s) {
    return s.substr(std::min(s.find_first_not_of(' '), s.size()));
  };
  while (std::getline(in, line)) {
    ++line_no;
    if (!inside && line == "```cpp") {
      inside = true;
      body.clear();
      expected.clear();
      continue;
    }
    if (!inside) continue;
    if (line == "```") {
      inside = false;
      ++blocks;
      tests += "TEST(Readme, Block" + std::to_string(blocks) +
               ") {\n"
               "  std::ostringstream captured;\n"
               "  CaptureCout capture(captured);\n"
               "  {\n" +
               body + "  }\n";
      if (!expected.empty())
        tests +=
            "  capture.restore();\n  EXPECT_EQ(captured.str(), R\"kiln(" + expected + ")kiln\");\n";
      tests += "}\n\n";
      continue;
    }
    std::string t = trim_left(line);
    if (t.rfind("#include", 0) == 0) {
      includes += line + "\n";
      continue;
    }
    if (t.rfind("// > ", 0) == 0 || t == "// >")
      expected += (t.size() > 5 ? t.substr(5) : "") + "\n";
    body += "#line " + std::to_string(line_no) + " \"README.md\"\n" + line + "\n";
  }
  std::ofstream out(argv[2]);
  out << "// Generated from README.md by tests/readme/extract.cpp; do not edit.\n"
      << "#include <gtest/gtest.h>\n#include <iostream>\n#include <sstream>\n"
      << includes << "#include \"kiln/kiln.h\"\n\nusing namespace kiln;\n\n"
      << "namespace {\n"
      << "// Sends std::cout to a string for the test's lifetime (or until restore()).\n"
      << "struct CaptureCout {\n"
      << "  explicit CaptureCout(std::ostringstream& s) : old(std::cout.rdbuf(s.rdbuf())) {}\n"
      << "  ~CaptureCout() { restore(); }\n"
      << "  void restore() { if (old) std::cout.rdbuf(old); old = nullptr; }\n"
      << "  std::streambuf* old;\n"
      << "};\n}  // namespace\n\n"
      << tests;
  if (blocks == 0) {
    std::cerr << "readme_extract: no ```cpp block in " << argv[1] << "\n";
    return 1;
  }
  return 0;
}
