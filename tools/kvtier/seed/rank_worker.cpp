// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "rank_worker.hpp"

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "bench_kv.hpp"
#include "synthetic.hpp"

namespace kvtier::seed {
namespace {

using Json = nlohmann::ordered_json;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class Worker {
 public:
  explicit Worker(const RankArgs& args) : args_(args) {}

  Json start() {
    auto g = geometry_for(args_.store.model, args_.store.tp_rank, args_.store.tp_world,
                          args_.store.chunk_tokens);
    if (!g) return error(g.error());
    geometry_ = *g;
    auto kv = BenchKv::create(geometry_, args_.max_tokens, args_.device, args_.gpu);
    if (!kv) return error(kv.error());
    kv_ = std::move(*kv);
    return Json{{"ok", true},
                {"device", kv_->describe()},
                {"pci_bus_id", kv_->pci_bus_id()},
                {"pid", ::getpid()},
                {"kv_bytes_per_token", geometry_.bytes_per_token()}};
  }

  Json handle(const Json& cmd) {
    const std::string op = cmd.value("op", "");
    if (op.ends_with("_many")) return handle_many(op, cmd);
    if (op == "open")
      return open(cmd.value("path", "direct"), cmd.value("dram_bytes", uint64_t{0}));
    if (op == "poison") return done(single().poison());
    if (op == "drop") return engine_ ? done(engine_->drop_page_cache()) : Json{{"ok", true}};
    if (!engine_)
      return error({ErrorCode::kInvalidArgument, fmt::format("'{}' before 'open'", op)});
    const auto ids =
        synthetic::tokens(cmd.value("seed", uint64_t{0}), cmd.value("tokens", uint64_t{0}));
    if (op == "prefill_save") return prefill_save(ids);
    if (op == "restore") return restore(ids, ids.size());
    if (op == "warm") {  // first-use costs (CUDA, pinned staging, cuFile, the copy buffers) outside
                         // windows
      if (auto c = single().copy_ceiling(0); !c) return error(c.error());
      return restore(ids, std::min<size_t>(ids.size(), geometry_.chunk_tokens));
    }
    if (op == "check") {
      auto bad = single().first_mismatch(ids);
      if (!bad) return error(bad.error());
      return Json{{"ok", true}, {"exact", *bad == ids.size()}, {"first_bad_token", *bad}};
    }
    if (op == "copy_ceiling") {  // the link a DRAM-tier restore of this session crosses
      auto c = single().copy_ceiling(geometry_.bytes_for_tokens(ids.size()));
      if (!c) return error(c.error());
      return Json{{"ok", true}, {"seconds", *c}, {"what", single().copy_ceiling_name()}};
    }
    if (op == "ceiling") {
      auto c = engine_->measure_read_ceiling(ids);
      if (!c) return error(c.error());
      return Json{{"ok", true}, {"bytes", c->bytes}, {"seconds", c->seconds}};
    }
    if (op == "extents") {  // for fio: the file ranges this rank's restore of the session reads
      auto x = engine_->read_extents(ids);
      if (!x) return error(x.error());
      Json list = Json::array();
      for (const FileExtent& e : *x) list.push_back({e.path, e.offset, e.length});
      return Json{{"ok", true}, {"extents", list}, {"request_bytes", request_bytes_}};
    }
    return error({ErrorCode::kInvalidArgument, fmt::format("unknown op '{}'", op)});
  }

 private:
  static Json error(const Status& st) {
    return Json{{"ok", false}, {"error", st.to_string()}, {"code", static_cast<int>(st.code())}};
  }
  static Json done(const Status& st) { return st.ok() ? Json{{"ok", true}} : error(st); }

  Json open(const std::string& path, uint64_t dram_bytes) {
    engine_.reset();  // one engine per rank store at a time (the store is locked)
    cli::StoreFlags flags = args_.store;
    flags.io = path;
    auto options = flags.options(true);
    if (!options) return error(options.error());
    options->dram_bytes = dram_bytes;
    if (auto r = options->resolved()) request_bytes_ = r->io_request_bytes;
    auto engine = Engine::open(*options);
    if (!engine) return error(engine.error());
    engine_ = std::move(*engine);
    const Stats s = engine_->stats();
    return Json{{"ok", true}, {"io_engine", s.io_engine}, {"fallback", s.io_fallback}};
  }

  Json prefill_save(std::span<const Token> ids) {
    auto t0 = Clock::now();
    if (Status st = single().prefill(ids); !st.ok()) return error(st);
    const double prefill_s = since(t0);
    t0 = Clock::now();
    auto saved = engine_->save(ids, single().view());
    if (!saved) return error(saved.error());
    return Json{{"ok", true},
                {"prefill_seconds", prefill_s},
                {"save_seconds", since(t0)},
                {"chunks_written", saved->chunks_written},
                {"bytes_written", saved->bytes_written},
                {"dram_records", engine_->stats().dram_records}};
  }

  // Lookup to all KV in place and verified (kvtier checks every payload checksum where it lands).
  Json restore(std::span<const Token> ids, size_t n) {
    const Stats before = engine_->stats();
    auto t0 = Clock::now();
    auto hit = engine_->lookup(ids.first(n));
    if (!hit) return error(hit.error());
    auto r = engine_->restore(ids.first(n), single().view());
    const double seconds = since(t0);
    if (!r) return error(r.error());
    const Stats after = engine_->stats();
    return Json{{"ok", true},
                {"seconds", seconds},
                {"lookup_tokens", *hit},
                {"tokens_restored", r->tokens_restored},
                {"kv_bytes", geometry_.bytes_for_tokens(r->tokens_restored)},
                {"bytes_read", r->bytes_read},
                {"host_bytes", r->host_bytes},
                {"checksum_misses", r->checksum_misses},
                {"problem", r->problem},
                {"dram_hits", after.dram_hits - before.dram_hits},
                {"via_gds", after.gds_restores > before.gds_restores},
                {"gds", after.gds},
                {"fallback", after.io_fallback}};
  }

  // Concurrent restores: session i of the list goes to cache i, on thread i.
  Json handle_many(const std::string& op, const Json& cmd) {
    if (!engine_ && op != "poison_many")
      return error({ErrorCode::kInvalidArgument, fmt::format("'{}' before 'open'", op)});
    std::vector<std::vector<Token>> ids;
    for (const Json& s : cmd.at("sessions"))
      ids.push_back(
          synthetic::tokens(s.value("seed", uint64_t{0}), s.value("tokens", uint64_t{0})));
    while (caches_.size() < ids.size()) {
      auto kv = caches_.empty()
                    ? Result<std::unique_ptr<BenchKv>>(std::move(kv_))
                    : BenchKv::create(geometry_, args_.max_tokens, args_.device, args_.gpu);
      if (!kv) return error(kv.error());
      caches_.push_back(std::move(*kv));
    }
    std::vector<Json> results(ids.size());
    const uint64_t gds_before = engine_ ? engine_->stats().gds_restores : 0;
    std::vector<std::thread> threads;
    for (size_t i = 0; i < ids.size(); ++i) {
      threads.emplace_back([&, i] {
        BenchKv& kv = *caches_[i];
        if (op == "poison_many") {
          results[i] = done(kv.poison());
        } else if (op == "check_many") {
          auto bad = kv.first_mismatch(ids[i]);
          results[i] =
              bad ? Json{{"ok", true}, {"exact", *bad == ids[i].size()}} : error(bad.error());
        } else if (op == "ceiling_many") {
          auto c = engine_->measure_read_ceiling(ids[i]);
          results[i] = c ? Json{{"ok", true}, {"seconds", c->seconds}} : error(c.error());
        } else if (op == "restore_many") {
          auto t0 = Clock::now();
          auto r = engine_->restore(ids[i], kv.view());
          const double seconds = since(t0);
          results[i] = r ? Json{{"ok", true},
                                {"seconds", seconds},
                                {"tokens_restored", r->tokens_restored},
                                {"kv_bytes", geometry_.bytes_for_tokens(r->tokens_restored)},
                                {"bytes_read", r->bytes_read},
                                {"host_bytes", r->host_bytes}}
                         : error(r.error());
        } else {
          results[i] = error({ErrorCode::kInvalidArgument, fmt::format("unknown op '{}'", op)});
        }
      });
    }
    for (auto& t : threads) t.join();
    Json out = {{"ok", true},
                {"results", Json::array()},
                {"gds_restores", engine_ ? engine_->stats().gds_restores - gds_before : 0}};
    for (Json& r : results) {
      if (!r.value("ok", false)) return r;
      out["results"].push_back(std::move(r));
    }
    return out;
  }

  BenchKv& single() { return kv_ ? *kv_ : *caches_.front(); }

  RankArgs args_;
  KvGeometry geometry_;
  std::unique_ptr<BenchKv> kv_;
  std::vector<std::unique_ptr<BenchKv>> caches_;
  std::unique_ptr<Engine> engine_;
  uint64_t request_bytes_ = 0;  // the engine's read request size, which fio reads in too
};

}  // namespace

void add_rank_flags(CLI::App& cmd, RankArgs& args) {
  args.store.add_to(cmd);
  cmd.add_option("--max-tokens", args.max_tokens, "Capacity of the rank's paged KV cache")
      ->required()
      ->transform(cli::whole_number(1, cli::kMaxTokens));
  cmd.add_option("--device", args.device, "auto, cuda or host");
  cmd.add_option("--gpu", args.gpu, "CUDA device of this rank")
      ->transform(cli::whole_number(0, INT32_MAX));
}

int run_rank_worker(const RankArgs& args) {
  Worker worker(args);
  Json hello = worker.start();
  std::cout << hello.dump() << std::endl;
  if (!hello["ok"].get<bool>()) return 1;
  for (std::string line; std::getline(std::cin, line);) {
    Json cmd = Json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (cmd.is_discarded()) {
      std::cout << Json{{"ok", false}, {"error", "malformed command"}}.dump() << std::endl;
      continue;
    }
    if (cmd.value("op", "") == "quit") break;
    std::cout << worker.handle(cmd).dump() << std::endl;
  }
  return 0;
}

}  // namespace kvtier::seed
