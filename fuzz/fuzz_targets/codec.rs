//! The framing codec over arbitrary byte streams, split at arbitrary points: it must never
//! panic, never yield a frame over the limit, and decode the same frames however the stream
//! is split (as reads from a socket would split it).
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use tokio_util::codec::Decoder;

const MAX: usize = 4096;

fn decode_all(chunks: &[&[u8]]) -> (Vec<Vec<u8>>, bool) {
    let mut codec = askbus::protocol::codec(MAX);
    let mut buf = BytesMut::new();
    let mut frames = Vec::new();
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        loop {
            match codec.decode(&mut buf) {
                Ok(Some(frame)) => {
                    assert!(frame.len() <= MAX);
                    // Every frame goes through the daemon's parser too.
                    let _ = askbus::protocol::parse_inbound(&frame);
                    frames.push(frame.to_vec());
                }
                Ok(None) => break,
                Err(e) => {
                    assert!(askbus::protocol::is_frame_too_large(&e));
                    return (frames, true);
                }
            }
        }
    }
    (frames, false)
}

fuzz_target!(|data: &[u8]| {
    let whole = decode_all(&[data]);
    let split_at = data.first().map_or(0, |&b| b as usize % (data.len() + 1));
    let (a, b) = data.split_at(split_at);
    let split = decode_all(&[a, b]);
    assert_eq!(whole, split);
});
