// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// The split16 codec on files of KV bytes (bench/codec/forward_kv.py writes forward-pass KV):
// compression ratio, and encode and decode rates on one CPU thread, every file checked to decode
// to its own bytes. One JSON line per file.
//
// Usage: kvtier_codec_bench FILE... [--record-bytes N]   (default: each file as one record; with N,
// the file is cut into records of N bytes, as a store would hold it)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "codec/split16.hpp"
#include "common/posix.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

int run(const std::string& path, size_t record_bytes) {
  const auto text = kvtier::read_file(path);
  if (!text || text->empty()) {
    std::fprintf(stderr, "codec_bench: %s is empty or unreadable\n", path.c_str());
    return 1;
  }
  std::vector<std::byte> raw(text->size());
  std::memcpy(raw.data(), text->data(), text->size());
  if (record_bytes == 0) record_bytes = raw.size();
  size_t stored_total = 0, records = 0;
  double encode_s = 0, decode_s = 0;
  std::vector<std::byte> stored(kvtier::codec::split16_bound(record_bytes)), back(record_bytes);
  for (size_t at = 0; at < raw.size(); at += record_bytes, ++records) {
    const size_t n = std::min(record_bytes, raw.size() - at);
    std::span<const std::byte> record(raw.data() + at, n);
    auto t = Clock::now();
    auto size = kvtier::codec::split16_encode(record, stored);
    encode_s += seconds_since(t);
    if (!size) {
      std::fprintf(stderr, "codec_bench: %s\n", size.error().to_string().c_str());
      return 1;
    }
    std::span<const std::byte> s(stored.data(), *size);
    t = Clock::now();
    kvtier::Status ok = kvtier::codec::split16_decode(s, std::span(back.data(), n));
    decode_s += seconds_since(t);
    if (!ok.ok() || std::memcmp(back.data(), record.data(), n) != 0) {
      std::fprintf(stderr, "codec_bench: %s: record %zu did not decode to its bytes\n",
                   path.c_str(), records);
      return 1;
    }
    stored_total += *size;
  }
  std::printf(
      "{\"file\": \"%s\", \"codec\": \"split16\", \"raw_bytes\": %zu, \"stored_bytes\": %zu, "
      "\"records\": %zu, \"ratio\": %.4f, \"encode_gbps_1thread\": %.3f, "
      "\"decode_gbps_1thread\": %.3f, \"byte_exact\": true}\n",
      path.c_str(), raw.size(), stored_total, records,
      static_cast<double>(raw.size()) / static_cast<double>(stored_total),
      static_cast<double>(raw.size()) / encode_s / 1e9,
      static_cast<double>(raw.size()) / decode_s / 1e9);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  size_t record_bytes = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--record-bytes" && i + 1 < argc) {
      record_bytes = std::strtoull(argv[++i], nullptr, 10);
    } else {
      files.push_back(a);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "usage: kvtier_codec_bench FILE... [--record-bytes N]\n");
    return 2;
  }
  for (const auto& f : files) {
    if (int rc = run(f, record_bytes); rc != 0) return rc;
  }
  return 0;
}
