//! Estimates of what a value holds on the heap, for the history cache's memory bound
//! (`history.rs`): each allocation as the allocator rounds it.

use std::mem::size_of;

use serde_json::Value;

use crate::providers::{Block, Message};

/// What a parsed JSON value holds on the heap beyond its own `Value`. serde_json's objects
/// are `BTreeMap`s (no `preserve_order` in this tree), whose nodes have room for 11
/// entries: a small object costs a whole node, which is most of a small event's memory.
pub fn value_bytes(value: &Value) -> usize {
    match value {
        Value::String(s) => allocation(s.capacity()),
        Value::Array(items) => {
            allocation(items.capacity() * size_of::<Value>()) + items.iter().map(value_bytes).sum::<usize>()
        }
        Value::Object(map) => {
            btree_nodes(map.len())
                + map.iter().map(|(key, value)| allocation(key.capacity()) + value_bytes(value)).sum::<usize>()
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => 0,
    }
}

/// What a conversation block holds on the heap beyond its own `Block`.
pub fn block_bytes(block: &Block) -> usize {
    match block {
        Block::Text(text) => allocation(text.capacity()),
        Block::Raw(value) => value_bytes(value),
        Block::ToolUse { id, name, input } => {
            allocation(id.capacity()) + allocation(name.capacity()) + value_bytes(input)
        }
        Block::ToolResult { tool_use_id, content, .. } => allocation(tool_use_id.capacity()) + value_bytes(content),
    }
}

/// What `blocks` add to a conversation: their slots in a message's `Vec` (counted once
/// each, not the `Vec`'s spare capacity) and their heap.
pub fn blocks_bytes(blocks: &[Block]) -> usize {
    blocks.iter().map(|block| size_of::<Block>() + block_bytes(block)).sum()
}

/// A message's slot in a conversation's `Vec`, without its blocks.
pub const MESSAGE_BYTES: usize = size_of::<Message>();

/// The nodes of a `BTreeMap<String, Value>` of `len` entries: a leaf holds up to 11
/// (keys, values, parent link: 632 bytes); larger maps fill leaves about two thirds and
/// add an internal node (with 12 child links) per ~8 leaves.
fn btree_nodes(len: usize) -> usize {
    const CAPACITY: usize = 11;
    const LEAF: usize = 16 + CAPACITY * (size_of::<String>() + size_of::<Value>());
    const INTERNAL: usize = LEAF + (CAPACITY + 1) * size_of::<usize>();
    match len {
        0 => 0,
        1..=CAPACITY => allocation(LEAF),
        _ => {
            let leaves = len.div_ceil(8);
            leaves * allocation(LEAF) + leaves.div_ceil(8) * allocation(INTERNAL)
        }
    }
}

/// What an allocator takes for `bytes`, about: rounded up to 16 with a word to spare (glibc
/// adds a header; mimalloc, the binary's allocator, has size classes about as coarse).
pub fn allocation(bytes: usize) -> usize {
    if bytes == 0 { 0 } else { (bytes + 8).div_ceil(16) * 16 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_object_weighs_a_whole_map_node() {
        // {"type": "end_turn"}: one leaf node of 11 slots (640 bytes as allocated), the
        // key and the string.
        assert_eq!(value_bytes(&serde_json::json!({"type": "end_turn"})), 640 + 16 + 16);
        assert_eq!(value_bytes(&serde_json::json!({})), 0);
        let large: serde_json::Map<String, Value> = (0..100).map(|i| (format!("k{i}"), Value::Null)).collect();
        assert!(value_bytes(&Value::Object(large)) > 100 * (size_of::<String>() + size_of::<Value>()));
    }

    #[test]
    fn a_text_block_weighs_its_slot_and_its_text() {
        let blocks = [Block::Text("x".repeat(1_000))];
        assert_eq!(blocks_bytes(&blocks), size_of::<Block>() + 1_008);
    }
}
