// SPDX-License-Identifier: Apache-2.0
// The tests' main: doctest's, and a run that selects no test case fails.
// A folder's tests share one executable and each ctest test runs its own
// source files' cases (--source-file, tests/CMakeLists.txt): a filter that
// matches nothing must not pass as a test that ran.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

namespace {

unsigned selected_test_cases = 0;

// Notes how many test cases passed the filters; reports nothing.
struct SelectedCount : doctest::IReporter {
  explicit SelectedCount(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override {
    selected_test_cases = stats.numTestCasesPassingFilters;
  }
  void test_case_start(const doctest::TestCaseData&) override {}
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

}  // namespace

DOCTEST_REGISTER_LISTENER("gpuaff_selected_count", 0, SelectedCount);

int main(int argc, char** argv) {
  doctest::Context context(argc, argv);
  const int rc = context.run();
  if (context.shouldExit() || rc != 0) return rc;  // --help, --list-*, --no-run; or a failure
  if (selected_test_cases == 0) {
    std::fprintf(stderr, "[doctest] no test case matches the filters (%s ...): nothing was tested\n",
                 argc > 1 ? argv[1] : "none");
    return 1;
  }
  return 0;
}
