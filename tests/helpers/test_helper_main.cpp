// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A child process for the multi-process tests:
//   kvtier_test_helper open <root>               open the tiny store; exit 0, or 3 when locked
//   kvtier_test_helper save-loop <root> <seed>   save sessions forever, printing each acknowledged
//   id
//   kvtier_test_helper save-loop-tp-free <root> <seed>   the same as rank 0 of TP 4 over a TP-free
//   store: the writer of head 0's group, which rank 1 follows
//   kvtier_test_helper save-loop-coded <root> <seed>   the same with coded records, its KV made as
//   compressible as a model's (testing::bf16_like)
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>

#include "compressible_kv.hpp"
#include "crash_workload.hpp"
#include "kvtier/kvtier.hpp"
#include "synthetic.hpp"

using namespace kvtier;

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string mode = argv[1];
  const bool coded = mode == "save-loop-coded";
  const bool tp_free = mode == "save-loop-tp-free" || coded;
  Options o = coded     ? crash_workload::coded_options(argv[2], 0, 4)
              : tp_free ? crash_workload::tp_free_options(argv[2], 0, 4)
                        : crash_workload::options(argv[2]);
  auto engine = Engine::open(o);
  if (!engine) {
    std::fprintf(stderr, "%s\n", engine.error().to_string().c_str());
    return engine.error().code() == ErrorCode::kLocked ? 3 : 1;
  }
  if (mode == "open") return 0;
  if ((mode != "save-loop" && !tp_free) || argc < 4) return 2;
  const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
  std::vector<std::byte> kv;
  for (uint64_t i = 0;; ++i) {
    const uint64_t id = seed * 100000 + i;
    auto tokens = synthetic::tokens(id, crash_workload::session_tokens(id));
    kv.resize(o.geometry.bytes_for_tokens(tokens.size()));
    synthetic::fill_kv(o.geometry, tokens, kv, tokens.size());
    if (coded) testing::bf16_like(kv);
    auto saved = (*engine)->save(tokens, ChunkedKv{{kv.data(), kv.size()}, tokens.size()});
    if (!saved) {
      std::fprintf(stderr, "save failed: %s\n", saved.error().to_string().c_str());
      return 1;
    }
    // Only now is the save acknowledged: the parent may expect it back after a crash.
    std::printf("%llu\n", static_cast<unsigned long long>(id));
    std::fflush(stdout);
  }
}
