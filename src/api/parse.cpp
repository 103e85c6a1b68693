// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
// Text to sizes and I/O paths (declared in kvtier/options.hpp): for the environment (env.cpp), the
// options and the tools alike, so that none of them calls up into the engine.
#include <cctype>
#include <limits>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "api/try.hpp"
#include "kvtier/options.hpp"

namespace kvtier {

std::string_view io_path_name(IoPath path) {
  switch (path) {
    case IoPath::kAuto:
      return "auto";
    case IoPath::kDirect:
      return "direct";
    case IoPath::kBuffered:
      return "buffered";
    case IoPath::kGds:
      return "gds";
  }
  return "?";
}

Result<IoPath> parse_io_path(std::string_view name) {
  if (name == "auto") return IoPath::kAuto;
  if (name == "direct" || name == "posix") return IoPath::kDirect;
  if (name == "buffered") return IoPath::kBuffered;
  if (name == "gds") return IoPath::kGds;
  return fail(
      ErrorCode::kInvalidArgument,
      fmt::format("I/O path '{}': expected auto, posix (or direct), buffered or gds", name));
}

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::kOff:
      return "off";
    case Compression::kSplit16:
      return "split16";
  }
  return "?";
}

Result<Compression> parse_compression(std::string_view name) {
  if (name == "off") return Compression::kOff;
  if (name == "split16") return Compression::kSplit16;
  return fail(ErrorCode::kInvalidArgument,
              fmt::format("compression '{}': expected off or split16", name));
}

namespace {

constexpr std::string_view kSizeGrammar =
    "a size is a decimal number of bytes, or of K, M, G or T (binary: 1K = 1024; KiB.. and B "
    "also taken), e.g. 4096, 64M, 1.5G";

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

/// The power of 1024 a unit names: "" or "B" 0, K/KiB 1 .. T/TiB 4 (either case); nullopt else.
std::optional<int> unit_power(std::string_view unit) {
  if (unit.empty() || unit == "B") return 0;
  if (unit.size() == 3 && unit.substr(1) == "iB") unit = unit.substr(0, 1);
  if (unit.size() != 1) return std::nullopt;
  const std::string_view units = "KMGT";
  const size_t at =
      units.find(static_cast<char>(std::toupper(static_cast<unsigned char>(unit[0]))));
  if (at == std::string_view::npos) return std::nullopt;
  return static_cast<int>(at) + 1;
}

}  // namespace

// Whole-number arithmetic on the digits, never strtod: strtod also reads hex ("0x1000000" was
// 16 MiB), exponents ("1e3" was 1,000 bytes), "inf" and a leading "+", none of them a size anyone
// means, and the count options refuse them all.
Result<uint64_t> parse_size(std::string_view text) {
  auto refuse = [&](std::string_view why) {
    return fail(ErrorCode::kInvalidArgument,
                fmt::format("size '{}' {}: {}", text, why, kSizeGrammar));
  };
  if (text.empty())
    return fail(ErrorCode::kInvalidArgument, fmt::format("empty size: {}", kSizeGrammar));
  if (text.starts_with("0x") || text.starts_with("0X")) return refuse("is hexadecimal");
  const size_t number_end = text.find_first_not_of("0123456789.");
  const std::string_view number = text.substr(0, number_end);
  const std::string_view unit = number_end == std::string_view::npos ? "" : text.substr(number_end);
  const size_t point = number.find('.');
  const std::string_view whole = number.substr(0, point);
  const std::string_view fraction =
      point == std::string_view::npos ? std::string_view() : number.substr(point + 1);
  if (!all_digits(whole) || (point != std::string_view::npos && !all_digits(fraction)))
    return refuse("is not a decimal number");
  const std::optional<int> power = unit_power(unit);
  if (!power) return refuse(fmt::format("has an unknown unit '{}'", unit));
  // value = (whole + fraction / 10^digits) * 1024^power, in 128 bits: exact, and overflow shows.
  __extension__ typedef unsigned __int128 U128;  // GCC and clang; -Wpedantic knows no 128 bits
  const U128 scale = U128{1} << (10 * *power);
  constexpr U128 kMax = std::numeric_limits<uint64_t>::max();
  U128 bytes = 0;
  for (char c : whole) {
    bytes = bytes * 10 + static_cast<unsigned>(c - '0');
    if (bytes > kMax) return refuse("overflows 64 bits");
  }
  bytes *= scale;
  if (bytes > kMax) return refuse("overflows 64 bits");
  if (!fraction.empty()) {
    if (fraction.size() > 12) return refuse("has more decimals than a size needs");
    U128 fraction_value = 0, denominator = 1;
    for (char c : fraction) {
      fraction_value = fraction_value * 10 + static_cast<unsigned>(c - '0');
      denominator *= 10;
    }
    if (fraction_value * scale % denominator != 0) return refuse("is not a whole number of bytes");
    bytes += fraction_value * scale / denominator;
    if (bytes > kMax) return refuse("overflows 64 bits");
  }
  return static_cast<uint64_t>(bytes);
}

std::string size_text(uint64_t bytes) {
  const char* units[] = {"TiB", "GiB", "MiB", "KiB"};
  for (int u = 0; u < 4; ++u) {
    const uint64_t unit = uint64_t{1} << (10 * (4 - u));
    if (bytes != 0 && bytes % unit == 0) return fmt::format("{} {}", bytes / unit, units[u]);
  }
  return fmt::format("{} B", bytes);
}

}  // namespace kvtier
