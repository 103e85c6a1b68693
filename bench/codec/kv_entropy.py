#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: 2026 kvtier authors
"""How far lossless coding can shrink a file of bf16 KV: Shannon bounds under several contexts.

Reads a file bench/codec/forward_kv.py wrote (`[2, layers, tokens, kv_heads, head_dim]` bf16, with
its PATH.json) and, for K and V, splits each 16-bit word into its 8 exponent bits and its 8 sign and
mantissa bits. Prints one JSON line per tensor: the entropy in bits a word of each plane, alone
(order 0) and given a context (the channel; the layer, head and channel; the previous token's
exponent at the same place), and the ratio each bound allows (16 bits over the two planes'
entropies). A bound ignores the cost of the model itself (a table per context), so a coder reaches
less. Entropy of the data, not of a codec: it says how much a better codec could gain.

Usage: python3 bench/codec/kv_entropy.py PATH
"""
import json
import sys

import numpy as np


def entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


def conditional_entropy(context: np.ndarray, symbol: np.ndarray, contexts: int) -> float:
    """H(symbol | context) in bits, symbols of 8 bits."""
    joint = np.bincount(context * 256 + symbol, minlength=contexts * 256).reshape(contexts, 256)
    rows = joint.sum(axis=1)
    total = rows.sum()
    return sum(r / total * entropy(row) for row, r in zip(joint, rows) if r)


def bounds(words: np.ndarray) -> dict:
    layers, tokens, heads, dim = words.shape
    exponent = ((words >> 7) & 0xFF).astype(np.int64)
    sign_mantissa = (((words >> 8) & 0x80) | (words & 0x7F)).astype(np.int64)
    channel = np.broadcast_to(np.arange(dim), words.shape)
    place = np.broadcast_to(
        (np.arange(layers)[:, None, None, None] * heads + np.arange(heads)[None, None, :, None]) * dim
        + np.arange(dim)[None, None, None, :], words.shape)
    previous = np.concatenate([exponent[:, :1], exponent[:, :-1]], axis=1)
    h_sm = entropy(np.bincount(sign_mantissa.ravel(), minlength=256))
    h = {
        "exponent": entropy(np.bincount(exponent.ravel(), minlength=256)),
        "exponent_given_channel": conditional_entropy(channel.ravel(), exponent.ravel(), dim),
        "exponent_given_layer_head_channel": conditional_entropy(place.ravel(), exponent.ravel(),
                                                                 layers * heads * dim),
        "exponent_given_previous_token": conditional_entropy(previous.ravel(), exponent.ravel(), 256),
        "exponent_given_previous_token_and_channel": conditional_entropy(
            (channel * 256 + previous).ravel(), exponent.ravel(), dim * 256),
    }
    out = {f"bits_{k}": round(v, 3) for k, v in h.items()}
    out["bits_sign_mantissa"] = round(h_sm, 3)
    out["bits_sign_mantissa_given_exponent"] = round(
        conditional_entropy(exponent.ravel(), sign_mantissa.ravel(), 256), 3)
    for k, v in h.items():
        out[f"bound_{k}"] = round(16 / (v + h_sm), 3)
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    with open(path + ".json") as f:
        meta = json.load(f)
    words = np.fromfile(path, dtype=np.uint16).reshape(meta["shape"])
    for k, name in enumerate(("K", "V")):
        print(json.dumps({"tensor": name, "file": path, "model": meta.get("model", "")} | bounds(words[k])))


if __name__ == "__main__":
    main()
