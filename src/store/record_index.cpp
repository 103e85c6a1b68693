// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: 2026 kvtier authors
#include "store/record_index.hpp"

#include <algorithm>

namespace kvtier {

const RecordMeta* RecordIndex::find(const Key128& key) const {
  auto it = served_.find(key);
  return it == served_.end() ? nullptr : &it->second;
}

void RecordIndex::add(const RecordMeta& meta) {
  offline_.erase(meta.key);
  served_[meta.key] = meta;
  if (meta.token_count < chunk_tokens_) partials_[meta.parent].push_back(meta.key);
}

void RecordIndex::remove(const RecordMeta& meta) {
  if (meta.token_count < chunk_tokens_) {
    auto it = partials_.find(meta.parent);
    if (it != partials_.end()) {
      std::erase(it->second, meta.key);
      if (it->second.empty()) partials_.erase(it);
    }
  }
  served_.erase(meta.key);
}

std::vector<RecordMeta> RecordIndex::partial_children(const Key128& parent) const {
  std::vector<RecordMeta> out;
  if (auto it = partials_.find(parent); it != partials_.end()) {
    for (const Key128& key : it->second) out.push_back(served_.at(key));
  }
  return out;
}

std::vector<RecordMeta> RecordIndex::live() const {
  std::vector<RecordMeta> out;
  out.reserve(all());
  for (const auto& [key, meta] : served_) out.push_back(meta);
  for (const auto& [key, meta] : offline_) out.push_back(meta);
  return out;
}

std::vector<RecordMeta> RecordIndex::served_records() const {
  std::vector<RecordMeta> out;
  out.reserve(served_.size());
  for (const auto& [key, meta] : served_) out.push_back(meta);
  return out;
}

}  // namespace kvtier
