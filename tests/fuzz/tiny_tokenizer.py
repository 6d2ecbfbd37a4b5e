#!/usr/bin/env python3
"""Writes small tokenizer.json seeds for the hf_tokenizer fuzz harness into DIR: byte-level BPE
with every component mttok reads (NFC, a Llama-3-style Split, ByteLevel, added tokens,
TemplateProcessing), a GPT-2-style one (ByteLevel's own pattern, merges as pairs), and a
SentencePiece-style one (Mistral's kind: Prepend and Replace, no pre-tokenizer, BPE over characters
with <0xXX> byte fallback, a Replace/ByteFallback/Fuse/Strip decoder)."""
import json
import os
import sys


def byte_level_chars():
    printable = [b for b in range(256) if ord("!") <= b <= ord("~") or 0xA1 <= b <= 0xAC or 0xAE <= b <= 0xFF]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def tokenizer(pre_tokenizer, merges, post_processor, normalizer):
    chars = byte_level_chars()
    vocab = {chars[b]: b for b in range(256)}
    for left, right in merges:
        vocab.setdefault(left + right, len(vocab))
    added = [{"id": len(vocab) + i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, c in enumerate(["<s>", "<|endoftext|>", "<|im_start|>"])]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": normalizer,
            "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "ignore_merges": True,
                      "vocab": vocab, "merges": merges}}


space = byte_level_chars()[32]
llama_pattern = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
seeds = {
    "llama3-like.json": tokenizer(
        {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": llama_pattern}, "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        [[space, "t"], ["h", "e"], [space + "t", "he"], ["l", "l"]],
        {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                  {"Sequence": {"id": "A", "type_id": 0}}],
         "special_tokens": {"<s>": {"id": "<s>", "ids": [260], "tokens": ["<s>"]}}},
        {"type": "Sequence", "normalizers": [{"type": "NFC"}]}),
    "gpt2-like.json": tokenizer(
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        [["h", "e"], ["l", "l"], ["he", "ll"]], {"type": "ByteLevel"}, None),
}


def character_tokenizer():
    spiece = "\u2581"
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab["<0x%02X>" % b] = 3 + b
    for token in [spiece, "h", "e", "l", "o", spiece + "h", "he", "ll", spiece + "he", "llo"]:
        vocab.setdefault(token, len(vocab))
    merges = [spiece + " h", "h e", "l l", spiece + "h e", "ll o"]
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, c in enumerate(["<unk>", "<s>", "</s>"])]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
            "normalizer": {"type": "Sequence", "normalizers": [
                {"type": "Prepend", "prepend": spiece},
                {"type": "Replace", "pattern": {"String": " "}, "content": spiece}]},
            "pre_tokenizer": None,
            "post_processor": {"type": "TemplateProcessing",
                               "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                          {"Sequence": {"id": "A", "type_id": 0}}],
                               "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
            "decoder": {"type": "Sequence", "decoders": [
                {"type": "Replace", "pattern": {"String": spiece}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
            "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "fuse_unk": True, "byte_fallback": True,
                      "vocab": vocab, "merges": merges}}


seeds["mistral-like.json"] = character_tokenizer()

# Near the limits (issue 30): normalizers nested as deep as a file may nest (64 levels, the
# innermost a Replace that grows text), a Split before ByteLevel whose pattern backtracks, and
# many added tokens sharing a first byte.
nested = {"type": "Replace", "pattern": {"String": "a"}, "content": "aaaa"}
for _ in range(30):  # each level two: {"type": ..., "normalizers": [ ... ]}
    nested = {"type": "Sequence", "normalizers": [nested]}
seeds["deep-normalizer.json"] = tokenizer(
    {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "(a+)+c|a"}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
    [["h", "e"]], {"type": "ByteLevel"}, nested)
many = tokenizer({"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
                 [["h", "e"]], {"type": "ByteLevel"}, None)
first = len(many["model"]["vocab"]) + len(many["added_tokens"])
many["added_tokens"] += [{"id": first + i, "content": "<t%d>" % i, "single_word": False, "lstrip": False,
                          "rstrip": False, "normalized": False, "special": True} for i in range(2000)]
seeds["many-added.json"] = many
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name, content in seeds.items():
    with open(os.path.join(out, name), "w", encoding="utf-8") as f:
        json.dump(content, f, ensure_ascii=False)
