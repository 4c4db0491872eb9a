//! The fixed newstyle handshake (option haggling), server side.
//!
//! Invariants:
//! 1. The server offers `FIXED_NEWSTYLE | NO_ZEROES` and drops a client that sets any other
//!    client flag (the spec's MUST).
//! 2. Every option but EXPORT_NAME gets a reply; unknown options get `ERR_UNSUP` and the
//!    haggling goes on.
//! 3. Option data is read into a buffer only after its length is checked against
//!    `MAX_OPTION_BYTES`; at most `MAX_OPTIONS` options are accepted per connection.
//! 4. There is one export. Every name (including the empty default name) selects it, so that
//!    clients which name the export after the target work as well as those that name none.
//! 5. Structured replies are used only if the client asked for them (NBD_OPT_STRUCTURED_REPLY);
//!    `base:allocation` is selected only by NBD_OPT_SET_META_CONTEXT after that (the spec's
//!    order), and a later SET replaces an earlier one.
//! 6. Entering transmission (GO, EXPORT_NAME) needs a connection slot (`admit`): without one,
//!    GO gets `ERR_POLICY` with the reason (`Refusal`) and the connection closes (EXPORT_NAME,
//!    which has no error reply, just closes).

use std::io::{Read, Write};

use crate::export::Export;
use crate::proto::*;

/// What the client negotiated for the transmission phase.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Negotiated {
    /// NBD_OPT_STRUCTURED_REPLY: READ and BLOCK_STATUS are answered with structured replies.
    pub structured: bool,
    /// `base:allocation` was selected: BLOCK_STATUS is served.
    pub base_allocation: bool,
}

/// Why a client was refused a connection slot (handshake invariant 6); the text is sent to the
/// client with `ERR_POLICY`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the server is serving its maximum number of connections ({0}); try again later")]
    ServerFull(u64),
    #[error("the server is serving its maximum number of connections from this peer ({0}, --max-peer-connections); try again later")]
    PeerFull(u64),
}

/// How the handshake ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The client chose the export: go on to transmission.
    Transmission(Negotiated),
    /// The client aborted (NBD_OPT_ABORT) or closed the connection before choosing.
    Ended,
    /// The client chose the export but no connection slot was free (invariant 6).
    Refused,
}

/// Runs the server side of the handshake on `r`/`w`. `admit` is asked for a connection slot
/// when the client enters transmission.
pub fn negotiate(
    export: &Export,
    r: &mut impl Read,
    w: &mut impl Write,
    admit: &dyn Fn() -> Result<(), Refusal>,
) -> Result<Handshake, ProtoError> {
    w.write_all(&NBDMAGIC.to_be_bytes())?;
    w.write_all(&IHAVEOPT.to_be_bytes())?;
    w.write_all(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes())?;
    w.flush()?;

    let mut b4 = [0u8; 4];
    if !read_exact_or_eof(r, &mut b4)? {
        return Ok(Handshake::Ended);
    }
    let client_flags = u32::from_be_bytes(b4);
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(ProtoError::ClientFlags(client_flags));
    }
    let no_zeroes = client_flags & FLAG_C_NO_ZEROES != 0;
    let mut neg = Negotiated::default();

    let mut data = Vec::new();
    for _ in 0..MAX_OPTIONS {
        let mut head = [0u8; 16];
        if !read_exact_or_eof(r, &mut head)? {
            return Ok(Handshake::Ended);
        }
        let magic = be_u64(&head[0..8]);
        if magic != IHAVEOPT {
            return Err(ProtoError::OptionMagic(magic));
        }
        let option = be_u32(&head[8..12]);
        let len = be_u32(&head[12..16]);
        if len > MAX_OPTION_BYTES {
            return Err(ProtoError::OptionTooLong { option, bytes: len });
        }
        data.resize(len as usize, 0);
        read_full(r, &mut data)?;

        match option {
            OPT_EXPORT_NAME => {
                // No way to refuse here but to disconnect (invariants 4 and 6).
                if admit().is_err() {
                    return Ok(Handshake::Refused);
                }
                w.write_all(&export.size_bytes().to_be_bytes())?;
                w.write_all(&export.transmission_flags().to_be_bytes())?;
                if !no_zeroes {
                    w.write_all(&[0u8; 124])?;
                }
                w.flush()?;
                // Structured replies and metadata contexts need GO (the spec), so EXPORT_NAME
                // always transmits with simple replies.
                return Ok(Handshake::Transmission(Negotiated::default()));
            }
            OPT_ABORT => {
                write_option_reply(w, option, REP_ACK, &[])?;
                w.flush()?;
                return Ok(Handshake::Ended);
            }
            OPT_LIST => {
                if len != 0 {
                    error_reply(w, option, REP_ERR_INVALID, "NBD_OPT_LIST takes no data")?;
                } else {
                    // The one export, under the default (empty) name.
                    write_option_reply(w, option, REP_SERVER, &[&0u32.to_be_bytes()])?;
                    write_option_reply(w, option, REP_ACK, &[])?;
                }
            }
            OPT_INFO | OPT_GO => match InfoRequest::parse(&data) {
                None => error_reply(w, option, REP_ERR_INVALID, "malformed NBD_OPT_INFO/GO data")?,
                Some(req) if option == OPT_GO => match admit() {
                    Err(why) => {
                        error_reply(w, option, REP_ERR_POLICY, &why.to_string())?;
                        w.flush()?;
                        return Ok(Handshake::Refused);
                    }
                    Ok(()) => {
                        send_info(export, w, option, &req)?;
                        w.flush()?;
                        return Ok(Handshake::Transmission(neg));
                    }
                },
                Some(req) => send_info(export, w, option, &req)?,
            },
            OPT_STRUCTURED_REPLY if len != 0 => error_reply(
                w,
                option,
                REP_ERR_INVALID,
                "NBD_OPT_STRUCTURED_REPLY takes no data",
            )?,
            OPT_STRUCTURED_REPLY => {
                neg.structured = true;
                write_option_reply(w, option, REP_ACK, &[])?;
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                meta_context(w, option, &data, &mut neg)?
            }
            OPT_STARTTLS => error_reply(
                w,
                option,
                REP_ERR_POLICY,
                "noftl serves without TLS (loopback by default)",
            )?,
            _ => error_reply(w, option, REP_ERR_UNSUP, "option not supported by noftl")?,
        }
        w.flush()?;
    }
    Err(ProtoError::TooManyOptions)
}

/// LIST or SET of metadata contexts (invariant 5). The one context is `base:allocation`.
fn meta_context(
    w: &mut impl Write,
    option: u32,
    data: &[u8],
    neg: &mut Negotiated,
) -> std::io::Result<()> {
    let set = option == OPT_SET_META_CONTEXT;
    if set && !neg.structured {
        return error_reply(
            w,
            option,
            REP_ERR_INVALID,
            "NBD_OPT_SET_META_CONTEXT needs NBD_OPT_STRUCTURED_REPLY first",
        );
    }
    let Some(req) = MetaRequest::parse(data) else {
        return error_reply(w, option, REP_ERR_INVALID, "malformed meta context data");
    };
    let ours = META_BASE_ALLOCATION.as_bytes();
    // SET selects by full name only; LIST also answers the namespace query "base:" and,
    // given no query at all, lists every context.
    let matched = if set {
        req.queries.contains(&ours)
    } else {
        req.queries.is_empty() || req.queries.iter().any(|q| *q == ours || *q == b"base:")
    };
    if set {
        neg.base_allocation = matched;
    }
    if matched {
        write_option_reply(
            w,
            option,
            REP_META_CONTEXT,
            &[&BASE_ALLOCATION_ID.to_be_bytes(), ours],
        )?;
    }
    write_option_reply(w, option, REP_ACK, &[])
}

fn error_reply(w: &mut impl Write, option: u32, kind: u32, msg: &str) -> std::io::Result<()> {
    write_option_reply(w, option, kind, &[msg.as_bytes()])
}

/// Replies to INFO/GO: the export's size and flags, the block sizes, and name or description
/// when asked, then ACK.
fn send_info(
    export: &Export,
    w: &mut impl Write,
    option: u32,
    req: &InfoRequest<'_>,
) -> std::io::Result<()> {
    let tflags = export.transmission_flags();
    write_option_reply(
        w,
        option,
        REP_INFO,
        &[
            &INFO_EXPORT.to_be_bytes(),
            &export.size_bytes().to_be_bytes(),
            &tflags.to_be_bytes(),
        ],
    )?;
    // Block sizes are sent whether asked for or not (the spec allows it): any byte, 4 KiB
    // preferred (the logical page; smaller writes cost a read-modify-write), 32 MiB at most.
    write_option_reply(
        w,
        option,
        REP_INFO,
        &[
            &INFO_BLOCK_SIZE.to_be_bytes(),
            &MIN_BLOCK_BYTES.to_be_bytes(),
            &PREFERRED_BLOCK_BYTES.to_be_bytes(),
            &MAX_PAYLOAD_BYTES.to_be_bytes(),
        ],
    )?;
    for info in req.infos() {
        match info {
            INFO_NAME => {
                write_option_reply(w, option, REP_INFO, &[&INFO_NAME.to_be_bytes(), req.name])?
            }
            INFO_DESCRIPTION => {
                let text = format!("noftl {} ({} clock)", export.name(), export.clock_name());
                write_option_reply(
                    w,
                    option,
                    REP_INFO,
                    &[&INFO_DESCRIPTION.to_be_bytes(), text.as_bytes()],
                )?
            }
            _ => {} // EXPORT and BLOCK_SIZE were sent; unknown info types are ignored (spec).
        }
    }
    write_option_reply(w, option, REP_ACK, &[])
}
