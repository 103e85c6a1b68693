// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Saves a session through the installed library and restores it, every byte compared: what a C++
// user of find_package(kvtier) does first. Usage: consumer STORE_DIR
#include <cstdio>
#include <vector>

#include <kvtier/kvtier.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer STORE_DIR\n");
    return 2;
  }
  kvtier::Options o;
  o.root = argv[1];
  o.geometry.model_id = "consumer";
  o.geometry.layers = 4;
  o.geometry.kv_heads = 2;
  o.geometry.head_dim = 64;
  o.geometry.element_bytes = 2;
  o.geometry.chunk_tokens = 64;
  o.capacity_bytes = 64 << 20;
  kvtier::Result<std::unique_ptr<kvtier::Engine>> engine = kvtier::Engine::open(o);
  if (!engine) {
    std::fprintf(stderr, "open: %s\n", engine.error().to_string().c_str());
    return 1;
  }
  const uint64_t n = 1000;
  std::vector<kvtier::Token> tokens(n);
  for (uint64_t i = 0; i < n; ++i) tokens[i] = static_cast<kvtier::Token>(i * 7 + 3);
  const uint64_t bytes = o.geometry.bytes_for_tokens(n);
  std::vector<std::byte> kv(bytes), out(bytes);
  for (uint64_t i = 0; i < bytes; ++i) kv[i] = static_cast<std::byte>(i * 131 + (i >> 11));
  auto saved = (*engine)->save(tokens, kvtier::ChunkedKv{{kv.data(), bytes}, n});
  if (!saved) {
    std::fprintf(stderr, "save: %s\n", saved.error().to_string().c_str());
    return 1;
  }
  auto restored = (*engine)->restore(tokens, kvtier::ChunkedKv{{out.data(), bytes}, n});
  if (!restored || restored->tokens_restored != n || out != kv) {
    std::fprintf(
        stderr, "restore: %s\n",
        restored ? "bytes differ or tokens missing" : restored.error().to_string().c_str());
    return 1;
  }
  std::printf("consumer: saved and restored %llu tokens byte-exact through kvtier %s\n",
              static_cast<unsigned long long>(n), KVTIER_VERSION_STRING);
  return 0;
}
