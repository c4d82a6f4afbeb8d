//! pcap files (being written).
/// One captured frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcapRecord {
    /// Timestamp, ns since the Unix epoch (or the trace's epoch).
    pub ts_ns: u64,
    pub data: Vec<u8>,
}
