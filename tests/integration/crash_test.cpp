// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A child saving sessions is killed with SIGKILL at random moments; after every kill the store
// reopens, every acknowledged save restores byte-exact, and verify finds nothing corrupt.
// KVTIER_CRASH_ITERATIONS sets the number of kills (default 40; the documented full run uses 1000).
// Up to 100 kills every acknowledged session is checked after every kill; beyond that (the long run)
// each kill checks the sessions acknowledged since the previous one plus 50 older ones at random,
// verify() runs every 25 kills, and every session is checked once more at the end.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "crash_workload.hpp"
#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

/// Starts the helper's save loop; returns its pid and the read end of its stdout.
std::pair<pid_t, FILE*> spawn_saver(const std::string& root, uint64_t seed) {
  int pipefd[2];
  if (::pipe(pipefd) != 0) return {-1, nullptr};
  pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(pipefd[1], STDOUT_FILENO);
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    std::string s = std::to_string(seed);
    ::execl(KVTIER_TEST_HELPER, KVTIER_TEST_HELPER, "save-loop", root.c_str(), s.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(pipefd[1]);
  return {pid, ::fdopen(pipefd[0], "r")};
}

TEST(CrashLoop, AcknowledgedSavesSurviveSigkill) {
  const char* env = std::getenv("KVTIER_CRASH_ITERATIONS");
  const int iterations = env ? std::atoi(env) : 40;
  testing::TempDir dir;
  std::mt19937_64 rng(testing::test_seed());
  std::vector<uint64_t> acked;
  const Options o = crash_workload::options(dir.str());
  const bool exhaustive = iterations <= 100;
  auto check_session = [&](Engine& engine, uint64_t sid, int it) {
    auto tokens = synthetic::tokens(sid, crash_workload::session_tokens(sid));
    testing::HostKv kv(o.geometry, tokens.size());
    auto r = engine.restore(tokens, kv.view);
    ASSERT_OK(r);
    ASSERT_EQ(r->tokens_restored, tokens.size()) << "acknowledged session " << sid << " lost after kill " << it;
    ASSERT_EQ(synthetic::first_mismatch(o.geometry, tokens, kv.span(), tokens.size()), tokens.size())
        << "session " << sid << " restored with wrong bytes after kill " << it;
  };
  for (int it = 0; it < iterations; ++it) {
    auto [pid, out] = spawn_saver(dir.str(), static_cast<uint64_t>(it) + 1);
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 60000));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (WIFEXITED(status)) {
      // The child ended by itself: a failure to open or save. Show why.
      FAIL() << "saver exited with " << WEXITSTATUS(status) << " at iteration " << it;
    }
    const size_t before = acked.size();
    unsigned long long id;
    while (std::fscanf(out, "%llu", &id) == 1) acked.push_back(id);
    std::fclose(out);

    auto e = Engine::open(o);
    ASSERT_OK(e) << "reopen after kill " << it;
    std::vector<uint64_t> to_check(acked.begin() + (exhaustive ? 0 : static_cast<long>(before)), acked.end());
    for (int k = 0; !exhaustive && k < 50 && before > 0; ++k) to_check.push_back(acked[rng() % before]);
    for (uint64_t sid : to_check) {
      check_session(**e, sid, it);
      if (::testing::Test::HasFatalFailure()) return;
    }
    if (exhaustive || it % 25 == 24 || it == iterations - 1) {
      auto report = (*e)->verify({});
      ASSERT_OK(report);
      ASSERT_EQ(report->corrupt_records, 0u) << "after kill " << it;
    }
  }
  if (!exhaustive) {
    auto e = Engine::open(o);
    ASSERT_OK(e);
    for (uint64_t sid : acked) {
      check_session(**e, sid, iterations);
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
  std::printf("crash loop: %d kills, %zu acknowledged sessions all restored byte-exact\n", iterations,
              acked.size());
  EXPECT_GT(acked.size(), 0u);
}

}  // namespace
}  // namespace kvtier
