//! MAC Control frames (IEEE 802.3 clause 31, EtherType 0x8808): 802.3x PAUSE (annex 31B, opcode
//! 0x0001) and 802.1Qbb Priority-based Flow Control (IEEE 802.1Q-2018 clause 36, opcode 0x0101).
//!
//! Layout after the Ethernet header (dst 01:80:C2:00:00:01):
//! - PAUSE: opcode (2) = 0x0001, pause_time (2).
//! - PFC: opcode (2) = 0x0101, class-enable vector (2; bit i = priority i, upper byte reserved 0),
//!   time\[0\]..time\[7\] (2 each), in quanta of 512 bit times; 0 = resume (XON).
//!
//! Frames are zero-padded to 60 bytes (the 64-byte minimum without FCS; our buffers carry no
//! FCS). MAC Control frames are untagged.

use super::ethernet::{self, MacAddr, ETHERTYPE_MAC_CONTROL};
use super::{be16, WireError};

/// Destination address of PAUSE and PFC frames (IEEE 802.3 annex 31B).
pub const PFC_DST: MacAddr = MacAddr([0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
/// MAC Control opcode of 802.3x PAUSE.
pub const OPCODE_PAUSE: u16 = 0x0001;
/// MAC Control opcode of 802.1Qbb PFC.
pub const OPCODE_PFC: u16 = 0x0101;
/// Length of a built PFC/PAUSE frame (padded, without FCS).
pub const PFC_FRAME_LEN: usize = ethernet::MIN_FRAME_LEN;
/// Bytes of a PFC frame that carry data (Ethernet + opcode + vector + 8 times).
const PFC_DATA_LEN: usize = ethernet::HEADER_LEN + 2 + 2 + 16;

/// A decoded MAC Control frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MacControl {
    /// 802.1Qbb PFC: `enable` bit i = priority i's time is valid; `times` in 512-bit-time quanta.
    Pfc {
        /// Low 8 bits of the class-enable vector.
        enable: u8,
        /// Pause time per priority (0 = resume).
        times: [u16; 8],
    },
    /// 802.3x PAUSE: pause the whole link for `time` quanta (0 = resume).
    Pause {
        /// Pause time in quanta.
        time: u16,
    },
}

/// Parse a MAC Control frame (`frame` starts at the Ethernet header, EtherType at offset 12).
/// Errors: [`WireError::Truncated`] (too short for its opcode), [`WireError::UnknownEtherType`]
/// (not 0x8808), [`WireError::Unsupported`] (another opcode, e.g. EPON GATE/REPORT). The
/// destination address is not checked (a port honors what it receives; see 802.3 31B.3.1).
pub fn parse(frame: &[u8]) -> Result<MacControl, WireError> {
    let et = be16(frame, 12).ok_or(WireError::Truncated)?;
    if et != ETHERTYPE_MAC_CONTROL {
        return Err(WireError::UnknownEtherType);
    }
    let op = be16(frame, 14).ok_or(WireError::Truncated)?;
    match op {
        OPCODE_PFC => {
            if frame.len() < PFC_DATA_LEN {
                return Err(WireError::Truncated);
            }
            let vec = be16(frame, 16).ok_or(WireError::Truncated)?;
            let mut times = [0u16; 8];
            for (i, t) in times.iter_mut().enumerate() {
                *t = be16(frame, 18 + 2 * i).ok_or(WireError::Truncated)?;
            }
            Ok(MacControl::Pfc {
                enable: vec as u8,
                times,
            })
        }
        OPCODE_PAUSE => {
            let time = be16(frame, 16).ok_or(WireError::Truncated)?;
            Ok(MacControl::Pause { time })
        }
        _ => Err(WireError::Unsupported),
    }
}

/// Build a PFC frame from `src`: class-enable vector `enable`, per-priority `times` (the times
/// of priorities whose enable bit is clear are written as given; callers normally pass 0).
/// Writes [`PFC_FRAME_LEN`] bytes (zero padded) and returns it.
pub fn build_pfc(
    buf: &mut [u8],
    src: impl Into<MacAddr>,
    enable: u8,
    times: [u16; 8],
) -> Result<usize, WireError> {
    let f = buf.get_mut(..PFC_FRAME_LEN).ok_or(WireError::NoRoom)?;
    f.fill(0);
    ethernet::write_header(f, PFC_DST, src.into(), ETHERTYPE_MAC_CONTROL)?;
    f[14..16].copy_from_slice(&OPCODE_PFC.to_be_bytes());
    f[16..18].copy_from_slice(&(enable as u16).to_be_bytes());
    for (i, t) in times.iter().enumerate() {
        f[18 + 2 * i..20 + 2 * i].copy_from_slice(&t.to_be_bytes());
    }
    Ok(PFC_FRAME_LEN)
}

/// Build an 802.3x PAUSE frame from `src` with pause `time`; writes and returns
/// [`PFC_FRAME_LEN`] bytes.
pub fn build_pause(buf: &mut [u8], src: impl Into<MacAddr>, time: u16) -> Result<usize, WireError> {
    let f = buf.get_mut(..PFC_FRAME_LEN).ok_or(WireError::NoRoom)?;
    f.fill(0);
    ethernet::write_header(f, PFC_DST, src.into(), ETHERTYPE_MAC_CONTROL)?;
    f[14..16].copy_from_slice(&OPCODE_PAUSE.to_be_bytes());
    f[16..18].copy_from_slice(&time.to_be_bytes());
    Ok(PFC_FRAME_LEN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::hex;

    const SRC: [u8; 6] = [2, 0, 0, 0, 0, 1];

    #[test]
    fn pfc_matches_scapy() {
        // python3 -c 'from scapy.all import *; from scapy.contrib.mac_control import *;
        //  print(bytes(Ether(src="02:00:00:00:00:01",dst="01:80:c2:00:00:01")/
        //  MACControlClassBasedFlowControl(c3_enabled=1,c3_pause_time=0xffff,c5_enabled=1,
        //  c5_pause_time=0x1234)).hex())'
        let want = hex("0180c2000001020000000001880801010028000000000000ffff00001234000000000000000000000000000000000000000000000000000000000000");
        let mut b = [0xeeu8; 64];
        let mut times = [0u16; 8];
        times[3] = 0xffff;
        times[5] = 0x1234;
        assert_eq!(build_pfc(&mut b, SRC, 0x28, times), Ok(60));
        assert_eq!(&b[..60], &want[..]);
        assert_eq!(
            parse(&want),
            Ok(MacControl::Pfc {
                enable: 0x28,
                times
            })
        );
        assert_eq!(
            build_pfc(&mut b[..59], SRC, 0, times),
            Err(WireError::NoRoom)
        );
    }

    #[test]
    fn pause_matches_scapy() {
        // python3 -c '... Ether(src="02:00:00:00:00:01",dst="01:80:c2:00:00:01")/
        //  MACControlPause(pause_time=0xabcd)'
        let want = hex("0180c200000102000000000188080001abcd000000000000000000000000000000000000000000000000000000000000000000000000000000000000");
        let mut b = [0xeeu8; 60];
        assert_eq!(build_pause(&mut b, SRC, 0xabcd), Ok(60));
        assert_eq!(&b[..], &want[..]);
        assert_eq!(parse(&want), Ok(MacControl::Pause { time: 0xabcd }));
        assert_eq!(parse(&want[..18]), Ok(MacControl::Pause { time: 0xabcd }));
    }

    #[test]
    fn errors() {
        let mut b = [0u8; 60];
        build_pfc(&mut b, SRC, 0xff, [7; 8]).unwrap();
        assert_eq!(parse(&b[..33]), Err(WireError::Truncated));
        assert!(parse(&b[..34]).is_ok());
        assert_eq!(parse(&b[..15]), Err(WireError::Truncated));
        assert_eq!(parse(&b[..5]), Err(WireError::Truncated));
        b[15] = 0x02; // GATE (EPON)
        assert_eq!(parse(&b), Err(WireError::Unsupported));
        b[13] = 0x00;
        assert_eq!(parse(&b), Err(WireError::UnknownEtherType));
        let mut p = [0u8; 60];
        build_pause(&mut p, SRC, 1).unwrap();
        assert_eq!(parse(&p[..17]), Err(WireError::Truncated));
        // Reserved upper byte of the vector is ignored.
        let mut q = [0u8; 60];
        build_pfc(&mut q, SRC, 0x01, [1, 0, 0, 0, 0, 0, 0, 0]).unwrap();
        q[16] = 0xff;
        assert_eq!(
            parse(&q),
            Ok(MacControl::Pfc {
                enable: 1,
                times: [1, 0, 0, 0, 0, 0, 0, 0]
            })
        );
    }
}
