// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// A test fixture for engine tests on host memory: a temporary store directory, the tiny geometry,
// and sessions saved from and restored into host buffers with every restored byte checked.
#pragma once

#include <gtest/gtest.h>

#include <span>

#include "synthetic.hpp"
#include "test_util.hpp"

namespace kvtier::testing {

class HostSessionTest : public ::testing::Test {
 protected:
  /// Saves `tokens`' synthetic KV.
  Result<SaveResult> save(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    synthetic::fill_kv(g_, tokens, kv.span(), tokens.size());
    return e.save(tokens, kv.view);
  }
  /// Restores and checks every restored byte; returns how many tokens came back.
  uint64_t restored(Engine& e, std::span<const Token> tokens) {
    HostKv kv(g_, tokens.size());
    auto r = e.restore(tokens, kv.view);
    EXPECT_TRUE(is_ok(r));
    if (!r) return 0;
    EXPECT_EQ(
        synthetic::first_mismatch(g_, tokens.first(r->tokens_restored), kv.span(), tokens.size()),
        r->tokens_restored);
    return r->tokens_restored;
  }

  TempDir dir_;
  KvGeometry g_ = tiny_geometry();
};

}  // namespace kvtier::testing
