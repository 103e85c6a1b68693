// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The Stats field table and the Prometheus exposition built from it, and the counters an engine
// keeps for them (per-tier hits, misses, latencies).
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier {
namespace {

TEST(StatFields, TheTableDescribesEveryFieldOfStatsOnce) {
  std::set<std::string_view> names;
  size_t bytes = 0;
  for (const StatField& f : stat_fields()) {
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate " << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_TRUE(std::regex_match(std::string(f.name), std::regex("[a-z][a-z0-9_]*"))) << f.name;
    switch (f.kind) {
      case StatField::Kind::kCounter:
      case StatField::Kind::kGauge:
        ASSERT_NE(f.number, nullptr);
        bytes += sizeof(uint64_t);
        break;
      case StatField::Kind::kText:
        ASSERT_NE(f.text, nullptr);
        bytes += sizeof(std::string);
        break;
      case StatField::Kind::kHistogram:
        ASSERT_NE(f.histogram, nullptr);
        bytes += sizeof(LatencyHistogram);
        break;
    }
  }
  // Every member is 8-byte aligned, so a field added to Stats but not to the table shows here.
  EXPECT_EQ(bytes, sizeof(Stats))
      << "Stats has a field stat_fields() does not list (or the other way round)";
  // Distinct members: write a different value through each pointer and read them all back.
  Stats s;
  uint64_t v = 1;
  for (const StatField& f : stat_fields()) {
    if (f.number != nullptr) s.*f.number = v++;
  }
  v = 1;
  for (const StatField& f : stat_fields()) {
    if (f.number != nullptr) {
      EXPECT_EQ(s.*f.number, v++) << f.name << " shares its member with another field";
    }
  }
}

/// Samples of a Prometheus text exposition: "name{labels}" -> value; fails on a malformed line.
std::map<std::string, double> parse_prometheus(const std::string& text) {
  static const std::regex sample(
      R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*",?)*\})? ([-+0-9.eE]+|\+Inf|NaN)$)");
  static const std::regex meta(R"(^# (HELP|TYPE) [a-zA-Z_:][a-zA-Z0-9_:]* .+$)");
  std::map<std::string, double> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::smatch m;
    if (std::regex_match(line, meta)) continue;
    EXPECT_TRUE(std::regex_match(line, m, sample)) << "not a Prometheus sample line: " << line;
    if (m.size() > 3) out[m[1].str() + m[2].str()] = std::stod(m[3].str());
  }
  return out;
}

TEST(StatFields, PrometheusTextCarriesEveryFieldWithItsValueAndLabels) {
  Stats s;
  s.restores = 7;
  s.records = 42;
  s.io_engine = "io_uring \"quoted\"";
  s.restore_latency.count = 3;
  s.restore_latency.sum_seconds = 0.5;
  s.restore_latency.cumulative.fill(3);
  const auto samples = parse_prometheus(prometheus_text(s, R"(rank="0")"));
  EXPECT_EQ(samples.at(R"(kvtier_restores_total{rank="0"})"), 7);
  EXPECT_EQ(samples.at(R"(kvtier_records{rank="0"})"), 42);
  EXPECT_EQ(samples.at(R"(kvtier_restore_latency_seconds_count{rank="0"})"), 3);
  EXPECT_EQ(samples.at(R"(kvtier_restore_latency_seconds_bucket{rank="0",le="+Inf"})"), 3);
  EXPECT_DOUBLE_EQ(samples.at(R"(kvtier_restore_latency_seconds_sum{rank="0"})"), 0.5);
  size_t listed = 0;
  for (const StatField& f : stat_fields()) {
    const std::string n(f.name);
    if (f.kind == StatField::Kind::kCounter)
      listed += samples.count("kvtier_" + n + R"(_total{rank="0"})");
    if (f.kind == StatField::Kind::kGauge) listed += samples.count("kvtier_" + n + R"({rank="0"})");
    if (f.kind == StatField::Kind::kHistogram)
      listed += samples.count("kvtier_" + n + R"(_seconds_count{rank="0"})");
    if (f.kind == StatField::Kind::kText) ++listed;  // in kvtier_info's labels, checked below
  }
  EXPECT_EQ(listed, stat_fields().size());
  bool info = false;
  for (const auto& [k, v] : samples)
    info = info || k.find(R"(io_engine="io_uring \"quoted\"")") != std::string::npos;
  EXPECT_TRUE(info) << "text fields are kvtier_info labels, escaped";
}

TEST(EngineStats, HitsMissesAndLatenciesAreCountedPerTier) {
  testing::TempDir dir;
  KvGeometry g = testing::tiny_geometry(256);
  Options o = testing::small_options(dir.str(), g);
  o.dram_bytes = 8 << 20;  // 31 slabs of a 256 KiB chunk's record image (header + payload)
  auto e = Engine::open(o);
  ASSERT_OK(e);
  auto tokens = synthetic::tokens(5, 1024);  // four chunks
  testing::HostKv kv(g, 1024);
  synthetic::fill_kv(g, tokens, kv.span(), 1024);
  ASSERT_OK((*e)->save(tokens, kv.view));
  testing::HostKv out(g, 2048);
  auto longer = synthetic::tokens(5, 2048);    // the same first 1024, then four chunks never stored
  ASSERT_OK((*e)->restore(longer, out.view));  // from the DRAM tier
  Stats s = (*e)->stats();
  EXPECT_EQ(s.dram_hits, 4u);
  EXPECT_EQ(s.store_hits, 0u);
  EXPECT_EQ(s.restore_misses, 4u);
  EXPECT_EQ(s.tokens_restored, 1024u);
  EXPECT_EQ(s.restore_latency.count, 1u);
  EXPECT_EQ(s.save_latency.count, 1u);
  EXPECT_EQ(s.restore_latency.cumulative.back(), 1u);
  EXPECT_GT(s.restore_latency.sum_seconds, 0.0);
  e->reset();
  o.dram_bytes = 0;
  e = Engine::open(o);
  ASSERT_OK(e);
  ASSERT_OK((*e)->restore(tokens, out.view));  // from the store
  s = (*e)->stats();
  EXPECT_EQ(s.store_hits, 4u);
  EXPECT_EQ(s.restore_misses, 0u);
  EXPECT_EQ(s.dram_hits, 0u);
}

}  // namespace
}  // namespace kvtier
