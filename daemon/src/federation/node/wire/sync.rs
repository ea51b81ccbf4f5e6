//! The catch-up messages: the reply to a hello (which node heard it), and the pages a node
//! serves of its pending questions on `P.sync.<node>.<asker>` (requests, pages, refusals).

use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::{envelope, parse_message, Entry, Message, Msg, ReplyError, VERSION};

/// The reply to a hello: the name of a node that heard it. A hint only (its sender is not
/// proven): the hello's sender asks that node for its pending through `P.sync.<node>.<me>`,
/// which only that node can answer.
pub fn hello_reply(node: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"v": VERSION, "node": node})).expect("JSON serializes")
}

/// The node a hello reply names, if it is one.
pub fn parse_hello_reply(bytes: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(bytes).ok()?;
    if v.get("v").and_then(Value::as_u64) != Some(VERSION) {
        return None;
    }
    v.get("node").and_then(Value::as_str).map(str::to_owned)
}

/// A sync request: the page after `after` (a correlationId; `None`: the first page).
pub fn sync_request(after: Option<&str>) -> Vec<u8> {
    serde_json::to_vec(&json!({"v": VERSION, "after": after})).expect("JSON serializes")
}

#[derive(Deserialize)]
struct RawSyncRequest {
    v: u64,
    #[serde(default)]
    after: Option<String>,
}

/// What a sync request asks: the page after which id. `Err` names what is wrong with it.
pub fn parse_sync_request(bytes: &[u8]) -> Result<Option<String>, String> {
    let r: RawSyncRequest =
        serde_json::from_slice(bytes).map_err(|e| format!("not a sync request: {e}"))?;
    if r.v != VERSION {
        return Err(format!(
            "federation protocol v{} (this node speaks v{VERSION})",
            r.v
        ));
    }
    Ok(r.after)
}

/// One page of a sync reply: `items` are shares exactly as they would go live (each with the
/// envelope of this page: the origin's epoch and its last sequence number when the page was
/// taken); `next` is the cursor of the next page, absent on the last.
pub fn sync_page(epoch: u64, seq: u64, items: &[Vec<u8>], next: Option<&str>) -> Vec<u8> {
    let mut out = Vec::with_capacity(items.iter().map(|i| i.len() + 1).sum::<usize>() + 128);
    envelope(&mut out, epoch, seq);
    out.extend_from_slice(br#","next":"#);
    serde_json::to_writer(&mut out, &next).expect("a string serializes");
    out.extend_from_slice(br#","items":["#);
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push(b',');
        }
        out.extend_from_slice(item);
    }
    out.extend_from_slice(b"]}");
    out
}

#[derive(Deserialize)]
struct RawSyncPage {
    v: u64,
    epoch: u64,
    seq: u64,
    #[serde(default)]
    next: Option<String>,
    #[serde(default)]
    items: Vec<Box<RawValue>>,
    #[serde(default)]
    error: Option<ReplyError>,
}

/// A sync reply, as read.
#[derive(Debug)]
pub struct SyncPage {
    pub epoch: u64,
    pub seq: u64,
    pub next: Option<String>,
    pub items: Vec<Entry>,
    /// Items larger than `max_item` bytes, left out.
    pub oversized: usize,
}

/// A sync reply; shares over `max_item` bytes are left out and counted.
pub fn parse_sync_page(bytes: &[u8], max_item: usize) -> Result<SyncPage, String> {
    let raw: RawSyncPage =
        serde_json::from_slice(bytes).map_err(|e| format!("an unreadable sync reply: {e}"))?;
    if let Some(e) = raw.error {
        return Err(format!("{}: {}", e.code, e.message));
    }
    if raw.v != VERSION {
        return Err(format!(
            "federation protocol v{} (this node speaks v{VERSION})",
            raw.v
        ));
    }
    let mut items = Vec::with_capacity(raw.items.len());
    let mut oversized = 0;
    for item in raw.items {
        if item.get().len() > max_item {
            oversized += 1;
            continue;
        }
        match parse_message(item.get().as_bytes()) {
            Ok(Message {
                body: Msg::Share(e),
                ..
            }) => items.push(e),
            _ => return Err("a sync reply holds something other than shares".into()),
        }
    }
    Ok(SyncPage {
        epoch: raw.epoch,
        seq: raw.seq,
        next: raw.next,
        items,
        oversized,
    })
}

/// A refusal sent as a reply (a sync request of another version, say).
pub fn error_reply(code: &str, message: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({"v": VERSION, "error": {"code": code, "message": message}}))
        .expect("JSON serializes")
}
