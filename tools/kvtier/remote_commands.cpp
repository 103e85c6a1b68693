// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// kvtier sync, and what put says (and, with --remote-wait, waits for) about the remote tier.
#include <cstdio>

#include <fmt/format.h>

#include "cli_common.hpp"
#include "synthetic.hpp"

namespace kvtier::cli {

int finish_remote_put(Engine& engine, const RemotePut& put) {
  // The engine's close waits for the write-behind queue anyway: waiting here makes the counts
  // final before they are printed.
  engine.wait_remote();
  const Stats s = engine.stats();
  std::printf(
      "remote: %llu records saved: %llu written to the cluster, %llu dropped (write-behind queue "
      "full), %llu failed\n",
      static_cast<unsigned long long>(put.records_saved),
      static_cast<unsigned long long>(s.remote_writes),
      static_cast<unsigned long long>(s.remote_write_drops),
      static_cast<unsigned long long>(s.remote_write_errors));
  const uint64_t missed = s.remote_write_drops + s.remote_write_errors;
  if (!put.wait) {
    if (missed > 0) {
      const std::string why =
          s.remote_write_errors > 0 ? fmt::format("; the last failure: {}", s.remote) : "";
      std::fprintf(stderr,
                   "kvtier: put: %llu record(s) not written to the cluster%s; `kvtier sync` with "
                   "the same flags, or put --remote-wait, publishes them\n",
                   static_cast<unsigned long long>(missed), why.c_str());
    }
    return 0;
  }
  // --remote-wait: whatever the queue dropped or failed, and whatever the cluster lacks of these
  // sessions (records present before this put included), is sent now.
  RemoteSyncReport total;
  for (uint64_t i = 0; i < put.sessions; ++i) {
    const auto ids = synthetic::tokens(put.seed + i, put.tokens);
    auto synced = engine.sync_remote(ids);
    if (!synced) {
      // Saved locally all the same: exit 1 (not published), as for records that failed below.
      (void)report(synced.error(), "put: --remote-wait: records not published");
      return 1;
    }
    total.records += synced->records;
    total.already_present += synced->already_present;
    total.published += synced->published;
    total.failed += synced->failed;
    if (total.problem.empty()) total.problem = synced->problem;
  }
  const uint64_t held = total.already_present + total.published;
  std::printf(
      "remote-wait: %llu of %llu records in the cluster (%llu published now, %llu failed)\n",
      static_cast<unsigned long long>(held), static_cast<unsigned long long>(total.records),
      static_cast<unsigned long long>(total.published),
      static_cast<unsigned long long>(total.failed));
  if (total.failed == 0) return 0;
  std::fprintf(stderr, "kvtier: put: --remote-wait: %llu record(s) not published: %s\n",
               static_cast<unsigned long long>(total.failed), total.problem.c_str());
  return 1;
}

int run_sync(const StoreFlags& flags) {
  if (flags.remote.empty()) {
    return report(
        Status(ErrorCode::kInvalidArgument,
               "sync publishes the local store's records to a remote tier: give --remote"),
        "sync");
  }
  auto options = flags.options(false);
  if (!options) return report(options.error(), "sync");
  // A snapshot of the index, without the store's lock: sync runs beside the node serving from it.
  options->read_only = true;
  if (Status st = check_store_root(options->root); !st.ok()) return report(st, "sync");
  auto engine = Engine::open(*options);
  if (!engine) return report(engine.error(), "sync");
  Progress progress("sync");
  auto synced = (*engine)->sync_remote({}, [&](uint64_t d, uint64_t t) { progress.update(d, t); });
  progress.finish();
  if (!synced) return report(synced.error(), "sync");
  std::printf(
      "sync: %llu local records: %llu already in the cluster, %llu published, %llu failed\n",
      static_cast<unsigned long long>(synced->records),
      static_cast<unsigned long long>(synced->already_present),
      static_cast<unsigned long long>(synced->published),
      static_cast<unsigned long long>(synced->failed));
  if (synced->failed == 0) return 0;
  std::fprintf(stderr, "kvtier: sync: %llu record(s) not published: %s\n",
               static_cast<unsigned long long>(synced->failed), synced->problem.c_str());
  return 1;
}

}  // namespace kvtier::cli
