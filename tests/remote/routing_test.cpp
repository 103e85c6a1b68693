// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Key routing, seeds and credentials: the specification's examples, then seeded random keys
// checked against a real server's CLUSTER KEYSLOT.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <random>

#include "redis_cluster.hpp"
#include "remote/credentials.hpp"
#include "remote/endpoint.hpp"
#include "remote/slot.hpp"
#include "test_util.hpp"

namespace kvtier::remote {
namespace {

using kvtier::testing::RedisCluster;

TEST(RemoteSlot, Crc16MatchesTheSpecificationsCheckValue) {
  EXPECT_EQ(crc16_xmodem("123456789"), 0x31C3);
  EXPECT_EQ(crc16_xmodem(""), 0);
}

TEST(RemoteSlot, HashTagsFollowTheSpecificationsRules) {
  EXPECT_EQ(hash_tag("{user1000}.following"), "user1000");
  EXPECT_EQ(key_slot("{user1000}.following"), key_slot("{user1000}.followers"));
  EXPECT_EQ(hash_tag("foo{}{bar}"), "foo{}{bar}");
  EXPECT_EQ(hash_tag("foo{{bar}}zap"), "{bar");
  EXPECT_EQ(hash_tag("foo{bar}{zap}"), "bar");
  EXPECT_EQ(hash_tag("no tag"), "no tag");
  EXPECT_EQ(hash_tag("open{only"), "open{only");
}

TEST(RemoteSlot, SeededRandomKeysMatchTheServersKeyslot) {
  auto server = RedisCluster::start(
      {.masters = 1, .replicas_per_master = 0, .cluster = true, .form_cluster = false});
  ASSERT_OK(server);
  std::mt19937_64 rng(kvtier::testing::test_seed());
  const std::string alphabet = "abcxyz{}019:/-_";
  for (int i = 0; i < 200; ++i) {
    std::string key(1 + rng() % 40, ' ');
    for (char& c : key) c = alphabet[rng() % alphabet.size()];
    const auto run = (*server)->cli((*server)->ports()[0], {"cluster", "keyslot", key});
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_EQ(std::stoul(run.output), key_slot(key)) << "key '" << key << "'";
  }
}

TEST(RemoteSeeds, ParsesListsAndRefusesWhatItCannotHonour) {
  auto seeds = parse_seeds("redis://127.0.0.1:7000,localhost:7001,[::1]:7002");
  ASSERT_OK(seeds);
  ASSERT_EQ(seeds->size(), 3u);
  EXPECT_EQ((*seeds)[0], (Endpoint{"127.0.0.1", 7000}));
  EXPECT_EQ((*seeds)[2], (Endpoint{"::1", 7002}));
  EXPECT_OK(parse_seeds("10.0.0.1:6379"));
  for (const char* bad :
       {"", "redis://", "redis://host", "redis://host:0", "redis://host:70000", "redis://host:12x",
        "rediss://host:1", "redis://user:pw@host:1", "redis://:1", "redis://a:1,,b:2"}) {
    auto result = parse_seeds(bad);
    ASSERT_FALSE(result.has_value()) << bad;
    EXPECT_EQ(result.error().code(), ErrorCode::kInvalidArgument) << bad;
  }
}

TEST(RemoteCredentials, ReadsEnvironmentOrFileAndNamesOnlyTheSource) {
  ::setenv("KVTIER_TEST_REDIS_PW", "s3cret", 1);
  auto from_env = read_password("KVTIER_TEST_REDIS_PW", "");
  ASSERT_OK(from_env);
  EXPECT_EQ(*from_env, "s3cret");
  ::unsetenv("KVTIER_TEST_REDIS_PW");
  auto unset = read_password("KVTIER_TEST_REDIS_PW", "");
  ASSERT_FALSE(unset.has_value());
  EXPECT_NE(unset.error().message().find("KVTIER_TEST_REDIS_PW"), std::string::npos);

  kvtier::testing::TempDir dir;
  const std::string path = dir.str() + "/pw";
  std::ofstream(path) << "from-file\n";
  auto from_file = read_password("", path);
  ASSERT_OK(from_file);
  EXPECT_EQ(*from_file, "from-file");
  EXPECT_FALSE(read_password("", dir.str() + "/missing").has_value());
  auto none = read_password("", "");
  ASSERT_OK(none);
  EXPECT_EQ(*none, "");
}

}  // namespace
}  // namespace kvtier::remote
