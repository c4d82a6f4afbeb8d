/*
 * longhaul's C shim over DPDK 22.11.
 *
 * Two jobs:
 *  1. Give DPDK's `static inline` functions (rx/tx burst, mbuf alloc/free/append/..., rte_errno,
 *     lcore id, rdtsc) a linkable symbol, prefixed `lh_`.
 *  2. Keep every DPDK struct except `struct rte_mbuf` out of Rust: ports are configured from the
 *     small plain `lh_port_conf`, and stats/link/info come back in plain `lh_*` structs. The one
 *     struct Rust reads directly, `struct rte_mbuf` (data pointer, lengths, segment count, on the
 *     fast path), has its size and the offsets Rust uses asserted here with _Static_assert and
 *     exported in `lh_layout`, which the Rust side checks against its own constants.
 *
 * Layout of the lh_* structs is mirrored by #[repr(C)] structs in src/lib.rs; their sizes are
 * asserted here and exported in `lh_layout` too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* fopencookie */
#endif
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_eth_ring.h>
#include <rte_ethdev.h>
#include <rte_lcore.h>
#include <rte_log.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>
#include <rte_ring.h>

/* ---- struct rte_mbuf: what Rust relies on (must match dpdk-sys/src/lib.rs `mbuf_layout`) ---- */

#define LH_MBUF_SIZE 128
#define LH_OFF_BUF_ADDR 0
#define LH_OFF_DATA_OFF 16
#define LH_OFF_NB_SEGS 20
#define LH_OFF_PKT_LEN 36
#define LH_OFF_DATA_LEN 40
#define LH_OFF_BUF_LEN 54
#define LH_OFF_POOL 56

_Static_assert(sizeof(struct rte_mbuf) == LH_MBUF_SIZE, "sizeof(struct rte_mbuf) changed");
_Static_assert(sizeof(struct rte_eth_xstat) == 16, "struct rte_eth_xstat changed");
_Static_assert(sizeof(struct rte_eth_xstat_name) == 64 && RTE_ETH_XSTATS_NAME_SIZE == 64,
               "struct rte_eth_xstat_name changed");
_Static_assert(offsetof(struct rte_mbuf, buf_addr) == LH_OFF_BUF_ADDR, "rte_mbuf.buf_addr moved");
_Static_assert(offsetof(struct rte_mbuf, data_off) == LH_OFF_DATA_OFF, "rte_mbuf.data_off moved");
_Static_assert(offsetof(struct rte_mbuf, nb_segs) == LH_OFF_NB_SEGS, "rte_mbuf.nb_segs moved");
_Static_assert(offsetof(struct rte_mbuf, pkt_len) == LH_OFF_PKT_LEN, "rte_mbuf.pkt_len moved");
_Static_assert(offsetof(struct rte_mbuf, data_len) == LH_OFF_DATA_LEN, "rte_mbuf.data_len moved");
_Static_assert(offsetof(struct rte_mbuf, buf_len) == LH_OFF_BUF_LEN, "rte_mbuf.buf_len moved");
_Static_assert(offsetof(struct rte_mbuf, pool) == LH_OFF_POOL, "rte_mbuf.pool moved");
_Static_assert(sizeof(((struct rte_mbuf *)0)->buf_addr) == 8, "rte_mbuf.buf_addr size");
_Static_assert(sizeof(((struct rte_mbuf *)0)->data_off) == 2, "rte_mbuf.data_off size");
_Static_assert(sizeof(((struct rte_mbuf *)0)->nb_segs) == 2, "rte_mbuf.nb_segs size");
_Static_assert(sizeof(((struct rte_mbuf *)0)->pkt_len) == 4, "rte_mbuf.pkt_len size");
_Static_assert(sizeof(((struct rte_mbuf *)0)->data_len) == 2, "rte_mbuf.data_len size");
_Static_assert(sizeof(((struct rte_mbuf *)0)->buf_len) == 2, "rte_mbuf.buf_len size");
_Static_assert(sizeof(((struct rte_mbuf *)0)->pool) == 8, "rte_mbuf.pool size");
/* The private area (longhaul's Meta) starts right after the mbuf: rte_mbuf_to_priv(). */
_Static_assert(LH_MBUF_SIZE % RTE_MBUF_PRIV_ALIGN == 0, "priv area alignment");
_Static_assert(RTE_MBUF_PRIV_ALIGN == 8, "RTE_MBUF_PRIV_ALIGN changed");

/* ---- plain structs shared with Rust ---- */

struct lh_port_conf {
    struct rte_mempool *mp; /* rx queues take their mbufs from here */
    uint64_t rss_hf;        /* requested RSS hash functions (RTE_ETH_RSS_*) */
    uint16_t nb_rxq;
    uint16_t nb_txq;
    uint16_t nb_rxd;
    uint16_t nb_txd;
    uint8_t rss;         /* 1: request RSS over the rx queues */
    uint8_t promisc;     /* 1: enable promiscuous mode */
    uint8_t rss_key_len; /* bytes of rss_key used (the pattern, repeated to the NIC's size) */
    uint8_t pad_[5];
    uint8_t rss_key[64];
};

struct lh_port_result {
    uint64_t rss_hf;                 /* RSS hash functions applied (0: no RSS) */
    uint64_t flow_type_rss_offloads; /* what the PMD supports */
    uint16_t nb_rxd;                 /* descriptor counts after rte_eth_dev_adjust_nb_rx_tx_desc */
    uint16_t nb_txd;
    uint16_t max_rx_queues;
    uint16_t max_tx_queues;
    int32_t socket_id;
    int32_t promisc; /* 1 enabled, 0 not requested, < 0: -errno of the attempt */
    char driver[32];
    char step[64]; /* on error: the call that failed */
};

struct lh_eth_stats {
    uint64_t ipackets;
    uint64_t opackets;
    uint64_t ibytes;
    uint64_t obytes;
    uint64_t imissed;
    uint64_t ierrors;
    uint64_t oerrors;
    uint64_t rx_nombuf;
};

struct lh_link {
    uint32_t speed_mbps;
    uint8_t up;
    uint8_t full_duplex;
    uint8_t autoneg;
    uint8_t pad_;
};

_Static_assert(sizeof(struct lh_port_conf) == 96, "lh_port_conf size");
_Static_assert(offsetof(struct lh_port_conf, rss_key) == 32, "lh_port_conf.rss_key offset");
_Static_assert(sizeof(struct lh_port_result) == 128, "lh_port_result size");
_Static_assert(sizeof(struct lh_eth_stats) == 64, "lh_eth_stats size");
_Static_assert(sizeof(struct lh_link) == 8, "lh_link size");

struct lh_layout {
    uint32_t mbuf_size;
    uint32_t off_buf_addr;
    uint32_t off_data_off;
    uint32_t off_nb_segs;
    uint32_t off_pkt_len;
    uint32_t off_data_len;
    uint32_t off_buf_len;
    uint32_t off_pool;
    uint32_t pktmbuf_headroom;
    uint32_t priv_align;
    uint32_t port_conf_size;
    uint32_t port_result_size;
    uint32_t eth_stats_size;
    uint32_t link_size;
    uint32_t max_ethports;
};

const struct lh_layout lh_layout = {
    .mbuf_size = sizeof(struct rte_mbuf),
    .off_buf_addr = offsetof(struct rte_mbuf, buf_addr),
    .off_data_off = offsetof(struct rte_mbuf, data_off),
    .off_nb_segs = offsetof(struct rte_mbuf, nb_segs),
    .off_pkt_len = offsetof(struct rte_mbuf, pkt_len),
    .off_data_len = offsetof(struct rte_mbuf, data_len),
    .off_buf_len = offsetof(struct rte_mbuf, buf_len),
    .off_pool = offsetof(struct rte_mbuf, pool),
    .pktmbuf_headroom = RTE_PKTMBUF_HEADROOM,
    .priv_align = RTE_MBUF_PRIV_ALIGN,
    .port_conf_size = sizeof(struct lh_port_conf),
    .port_result_size = sizeof(struct lh_port_result),
    .eth_stats_size = sizeof(struct lh_eth_stats),
    .link_size = sizeof(struct lh_link),
    .max_ethports = RTE_MAX_ETHPORTS,
};

/* ---- EAL ---- */

int lh_errno(void) { return rte_errno; }
unsigned lh_lcore_id(void) { return rte_lcore_id(); }
uint64_t lh_rdtsc(void) { return rte_rdtsc(); }
uint64_t lh_tsc_hz(void) { return rte_get_tsc_hz(); }

/* ---- mempool / mbuf ---- */

unsigned lh_mempool_avail_count(const struct rte_mempool *mp) { return rte_mempool_avail_count(mp); }
unsigned lh_mempool_size(const struct rte_mempool *mp) { return mp->size; }
uint16_t lh_pool_priv_size(struct rte_mempool *mp) { return rte_pktmbuf_priv_size(mp); }
uint16_t lh_pool_data_room(struct rte_mempool *mp) { return rte_pktmbuf_data_room_size(mp); }

struct rte_mbuf *lh_pktmbuf_alloc(struct rte_mempool *mp) { return rte_pktmbuf_alloc(mp); }
void lh_pktmbuf_free(struct rte_mbuf *m) { rte_pktmbuf_free(m); }
void lh_pktmbuf_reset(struct rte_mbuf *m) { rte_pktmbuf_reset(m); }
char *lh_pktmbuf_append(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_append(m, len); }
char *lh_pktmbuf_prepend(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_prepend(m, len); }
int lh_pktmbuf_adj(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_adj(m, len) == NULL ? -1 : 0; }
int lh_pktmbuf_trim(struct rte_mbuf *m, uint16_t len) { return rte_pktmbuf_trim(m, len); }
void *lh_mtod(struct rte_mbuf *m) { return rte_pktmbuf_mtod(m, void *); }
uint16_t lh_data_len(const struct rte_mbuf *m) { return rte_pktmbuf_data_len(m); }
uint16_t lh_headroom(const struct rte_mbuf *m) { return rte_pktmbuf_headroom(m); }
uint16_t lh_tailroom(const struct rte_mbuf *m) { return rte_pktmbuf_tailroom(m); }
void *lh_mbuf_priv(struct rte_mbuf *m) { return rte_mbuf_to_priv(m); }

/* ---- ethdev ---- */

uint16_t lh_rx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_rx_burst(port, queue, pkts, n);
}

uint16_t lh_tx_burst(uint16_t port, uint16_t queue, struct rte_mbuf **pkts, uint16_t n)
{
    return rte_eth_tx_burst(port, queue, pkts, n);
}

/* Valid ethdev port ids, in order; returns how many (at most max were written). */
int lh_port_list(uint16_t *ids, int max)
{
    int n = 0;
    uint16_t p;
    RTE_ETH_FOREACH_DEV(p) {
        if (n < max)
            ids[n] = p;
        n++;
    }
    return n;
}

#define STEP(...) snprintf(r->step, sizeof(r->step), __VA_ARGS__)

/*
 * Configure, set up the queues of and start `port` (stopped, unconfigured or configured). Returns
 * 0 or a negative errno; on error r->step names the call that failed.
 */
int lh_port_setup(uint16_t port, const struct lh_port_conf *c, struct lh_port_result *r)
{
    struct rte_eth_dev_info info;
    struct rte_eth_conf conf;
    uint8_t key[64];
    uint16_t nb_rxd = c->nb_rxd, nb_txd = c->nb_txd;
    int ret, sock;
    uint16_t q;

    memset(r, 0, sizeof(*r));
    memset(&conf, 0, sizeof(conf));

    ret = rte_eth_dev_info_get(port, &info);
    if (ret != 0) {
        STEP("rte_eth_dev_info_get");
        return ret;
    }
    r->flow_type_rss_offloads = info.flow_type_rss_offloads;
    r->max_rx_queues = info.max_rx_queues;
    r->max_tx_queues = info.max_tx_queues;
    snprintf(r->driver, sizeof(r->driver), "%s", info.driver_name ? info.driver_name : "?");
    if (c->nb_rxq == 0 || c->nb_rxq > info.max_rx_queues) {
        STEP("rx queues: %u requested, the device has 1..%u", c->nb_rxq, info.max_rx_queues);
        return -EINVAL;
    }
    if (c->nb_txq == 0 || c->nb_txq > info.max_tx_queues) {
        STEP("tx queues: %u requested, the device has 1..%u", c->nb_txq, info.max_tx_queues);
        return -EINVAL;
    }

    if (c->rss && c->nb_rxq > 1) {
        uint64_t hf = c->rss_hf & info.flow_type_rss_offloads;
        if (hf != 0) {
            unsigned klen = info.hash_key_size ? info.hash_key_size : 40;
            unsigned i;
            if (klen > sizeof(key) || c->rss_key_len == 0) {
                STEP("RSS key: the device wants %u bytes", klen);
                return -EINVAL;
            }
            for (i = 0; i < klen; i++)
                key[i] = c->rss_key[i % c->rss_key_len];
            conf.rxmode.mq_mode = RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_key = key;
            conf.rx_adv_conf.rss_conf.rss_key_len = (uint8_t)klen;
            conf.rx_adv_conf.rss_conf.rss_hf = hf;
            r->rss_hf = hf;
        }
    }

    ret = rte_eth_dev_configure(port, c->nb_rxq, c->nb_txq, &conf);
    if (ret != 0) {
        STEP("rte_eth_dev_configure(%u rxq, %u txq)", c->nb_rxq, c->nb_txq);
        return ret;
    }
    ret = rte_eth_dev_adjust_nb_rx_tx_desc(port, &nb_rxd, &nb_txd);
    if (ret != 0) {
        STEP("rte_eth_dev_adjust_nb_rx_tx_desc(%u, %u)", c->nb_rxd, c->nb_txd);
        return ret;
    }
    r->nb_rxd = nb_rxd;
    r->nb_txd = nb_txd;
    sock = rte_eth_dev_socket_id(port);
    r->socket_id = sock;
    if (sock < 0)
        sock = SOCKET_ID_ANY;
    for (q = 0; q < c->nb_rxq; q++) {
        ret = rte_eth_rx_queue_setup(port, q, nb_rxd, sock, NULL, c->mp);
        if (ret != 0) {
            STEP("rte_eth_rx_queue_setup(queue %u, %u descriptors)", q, nb_rxd);
            return ret;
        }
    }
    for (q = 0; q < c->nb_txq; q++) {
        ret = rte_eth_tx_queue_setup(port, q, nb_txd, sock, NULL);
        if (ret != 0) {
            STEP("rte_eth_tx_queue_setup(queue %u, %u descriptors)", q, nb_txd);
            return ret;
        }
    }
    ret = rte_eth_dev_start(port);
    if (ret != 0) {
        STEP("rte_eth_dev_start");
        return ret;
    }
    if (c->promisc) {
        ret = rte_eth_promiscuous_enable(port);
        r->promisc = ret == 0 ? 1 : (ret < 0 ? ret : -EIO);
    }
    return 0;
}

int lh_eth_stats(uint16_t port, struct lh_eth_stats *s)
{
    struct rte_eth_stats st;
    int ret = rte_eth_stats_get(port, &st);
    memset(s, 0, sizeof(*s));
    if (ret != 0)
        return ret;
    s->ipackets = st.ipackets;
    s->opackets = st.opackets;
    s->ibytes = st.ibytes;
    s->obytes = st.obytes;
    s->imissed = st.imissed;
    s->ierrors = st.ierrors;
    s->oerrors = st.oerrors;
    s->rx_nombuf = st.rx_nombuf;
    return 0;
}

int lh_link_get_nowait(uint16_t port, struct lh_link *l)
{
    struct rte_eth_link link;
    int ret;
    memset(&link, 0, sizeof(link));
    memset(l, 0, sizeof(*l));
    ret = rte_eth_link_get_nowait(port, &link);
    if (ret != 0)
        return ret;
    l->speed_mbps = link.link_speed;
    l->up = link.link_status == RTE_ETH_LINK_UP;
    l->full_duplex = link.link_duplex == RTE_ETH_LINK_FULL_DUPLEX;
    l->autoneg = link.link_autoneg == RTE_ETH_LINK_AUTONEG;
    return 0;
}

/*
 * Two ethdev ports `a` and `b` joined back to back by two rte_rings of `depth` (a power of two)
 * entries: what one transmits, the other receives (net_ring's rte_eth_from_rings). Returns 0 or a
 * negative errno.
 */
int lh_ring_pair(const char *a, const char *b, unsigned depth, int socket, uint16_t *pa, uint16_t *pb)
{
    char name[RTE_RING_NAMESIZE];
    struct rte_ring *ab, *ba;
    int ret;
    unsigned node = socket < 0 ? (unsigned)SOCKET_ID_ANY : (unsigned)socket;

    if (snprintf(name, sizeof(name), "lh>%s", b) >= (int)sizeof(name))
        return -ENAMETOOLONG;
    ab = rte_ring_create(name, depth, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (ab == NULL)
        return -rte_errno;
    if (snprintf(name, sizeof(name), "lh>%s", a) >= (int)sizeof(name)) {
        rte_ring_free(ab);
        return -ENAMETOOLONG;
    }
    ba = rte_ring_create(name, depth, socket, RING_F_SP_ENQ | RING_F_SC_DEQ);
    if (ba == NULL) {
        ret = -rte_errno;
        rte_ring_free(ab);
        return ret;
    }
    ret = rte_eth_from_rings(a, &ba, 1, &ab, 1, node);
    if (ret < 0)
        return rte_errno ? -rte_errno : -EINVAL;
    *pa = (uint16_t)ret;
    ret = rte_eth_from_rings(b, &ab, 1, &ba, 1, node);
    if (ret < 0)
        return rte_errno ? -rte_errno : -EINVAL;
    *pb = (uint16_t)ret;
    return 0;
}

/* RTE_ETH_RSS_IP, checked against RSS_HF_IP in Rust. */
const uint64_t lh_rss_hf_ip = RTE_ETH_RSS_IP;

/* ---- EAL's log lines to a callback (longhaul's logger) ---- */

/* DPDK writes each log message with vfprintf to its log stream and flushes it (rte_vlog); this
 * stream hands what was written to `lh_log_cb` with the level of the message being logged
 * (rte_log_cur_msg_loglevel: RTE_LOG_EMERG 1 .. RTE_LOG_DEBUG 8), on the logging thread. */
static void (*lh_log_cb)(uint32_t level, const char *buf, size_t len);

static ssize_t lh_log_write(void *cookie, const char *buf, size_t len)
{
	(void)cookie;
	int level = rte_log_cur_msg_loglevel();
	if (lh_log_cb != NULL)
		lh_log_cb(level > 0 ? (uint32_t)level : RTE_LOG_INFO, buf, len);
	return (ssize_t)len;
}

/* Route every DPDK log message to `cb` (before rte_eal_init, to have EAL's own lines too).
 * Returns 0, or -errno when the stream cannot be made. Once per process: the stream is never
 * closed (DPDK may log until exit). */
int lh_log_to_callback(void (*cb)(uint32_t level, const char *buf, size_t len))
{
	static cookie_io_functions_t io = { .write = lh_log_write };
	FILE *f;

	lh_log_cb = cb;
	f = fopencookie(NULL, "w", io);
	if (f == NULL)
		return -errno;
	return rte_openlog_stream(f);
}
