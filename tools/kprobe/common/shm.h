/* The shared-memory session between the kprobe CLI and its agents.
 *
 * The CLI creates the session memory as an anonymous memfd, sized once and
 * sealed (it can neither shrink nor grow: nobody holding it can make the
 * other side fault on a page past its end), and hands the descriptor over:
 *
 *   -- COMMAND   the command inherits it under a high descriptor number the
 *                config names ("shm fd:N"); the agent maps it and closes it.
 *                With -f it stays open (not close-on-exec), so exec'd
 *                children, whose agents read the same config, map it too;
 *                forked children inherit the mapping.
 *   -p PID       it travels with the ARM request over the control socket
 *                (SCM_RIGHTS); the config says "shm passed".
 *
 * So there is no name in /dev/shm: nothing is left behind when either side
 * dies, and the memory is never given to the target's user (an agent of
 * another user gets a descriptor, not a file it could open).
 *
 * It holds:
 *
 *   header       status, the agent's error message, registration progress
 *   descriptors  one per resolved probe point (name, address, object)
 *   rings        one single-producer ring per thread of the target, claimed
 *                on the thread's first hit; events go there without locks or
 *                system calls; a writer that finds its ring full waits
 *                (spinning, a few seconds at most) for the reader, or, when
 *                the header says drop, drops and counts
 *   counters     hits per probe point, one row per ring (plain increments by
 *                the ring's owner) plus one shared row for ringless threads
 *   histograms   log2 latency buckets, one row per ring plus a shared row
 *   objects      the executable segments of the objects the agent saw the
 *                program load, so that the CLI names addresses in a
 *                library the program has closed since, even one it never
 *                saw in /proc/PID/maps
 *
 * The layout has room for KPS_RINGS rings, one per thread: the object is
 * sparse (only touched pages use memory, a memfd reserves nothing), so a
 * ring costs nothing until a thread claims it.  The CLI may use fewer
 * (header nrings).  A thread that finds no ring loses its trace events
 * (counted in ringless_lost, apart from the ring-full losses each ring
 * counts); count and latency never lose: a ringless thread adds to the
 * shared row.
 *
 * The target can write all of it.  The CLI trusts nothing it reads here but
 * event payloads: every count, index, size and string is checked, ring
 * positions are read once and validated, the consumer keeps its own copy of
 * each ring's tail, and what it prints of descriptors comes from checked,
 * terminated copies.  The layout parameters and time base the CLI wrote are
 * never read back. */
#ifndef KPROBE_SHM_H
#define KPROBE_SHM_H

#include <stddef.h>
#include <stdint.h>

#define KPS_MAGIC	0x346d68736b70726bULL	/* "krpkshm4" */
#define KPS_RINGS	4096			/* room for this many threads */
#define KPS_RING_BYTES	(512u << 10)		/* power of two */
#define KPS_MAX_PROBES	16384
#define KPS_BUCKETS	64
#define KPS_MSG		512
#define KPS_NAME_MAX	64			/* config "shm" value */
/* A launched command inherits the session descriptor at this number or
 * the first free one above it: out of the way of the program's own. */
#define KPS_INHERIT_FD	900

enum kps_status {
	KPS_INIT = 0,		/* created by the CLI, no agent yet */
	KPS_LOADING,		/* an agent is resolving and registering */
	KPS_READY,		/* probes armed */
	KPS_FAILED,		/* error[] says why; nothing is armed */
};

enum kps_action { ACT_TRACE = 1, ACT_COUNT, ACT_LATENCY, ACT_LOAD, ACT_RUN, ACT_RECORD };

struct kps_header {
	uint64_t magic;
	uint32_t status;		/* enum kps_status */
	int32_t error_kind;		/* 2: bad probe (exit 2), 1: other failure */
	char error[KPS_MSG];
	uint64_t progress_done;		/* probe points registered so far */
	uint64_t progress_total;
	uint64_t ndesc;			/* descriptors handed out (atomic) */
	uint64_t ringless_lost;		/* events of threads that found no ring */
	uint32_t rings_hint;		/* rings claimed so far: highest index + 1 */
	/* Written by the CLI only: 1 when a full ring drops events (--drop,
	 * or the CLI stopped reading); 0: the writer waits, bounded. */
	uint32_t drop;
	uint64_t skipped;		/* glob matches libkprobes refused */
	char skip_example[160];		/* "name: reason" of the first one */
	int32_t agent_pid;
	uint32_t nrings, ring_bytes, max_probes;
	/* Event times: TSC ticks when the CPU's TSC is invariant (cheaper to
	 * read than the clock), converted by the reader against this base;
	 * else CLOCK_MONOTONIC ns. */
	uint32_t time_tsc;
	uint64_t tsc_base, ns_base;
	/* run with a command: the tool has printed what comes before the
	 * command's own output (bpftrace's "Attaching..." line and BEGIN's);
	 * the agent holds main() back until then (a bounded wait). */
	uint32_t go;
	uint32_t nobjects;		/* objects[] entries handed out (atomic) */
};

/* DESC_WATCH: a watched variable (the first descriptor of a watch
 * session) or an instruction that accessed it (addr: the instruction after
 * it; the agent names it, name[0] written last: empty until then). */
enum kps_desc_kind { DESC_ENTRY = 1, DESC_RETURN, DESC_TRACEPOINT, DESC_WATCH };

struct kps_desc {
	uint64_t addr;
	uint64_t missed;		/* the probe's nmissed, copied by the agent */
	uint32_t pid;			/* process whose address space addr is in */
	uint16_t spec;			/* index of the PROBE on the command line */
	uint8_t kind;			/* enum kps_desc_kind */
	uint8_t ready;			/* set last, with release order */
	char name[120];			/* "func", "func+0x4", "file.c:12", "0x..." */
	char object[64];		/* file name of the ELF object */
	char args[192];			/* a tracepoint traced with the arguments
					 * it declares: them, as spec ARGs */
};

/* An executable segment of a loaded object, as /proc/PID/maps shows it
 * (page-aligned start and end, file offset), appended by the agent when
 * the object loads; ready is set last, with release order. */
#define KPS_OBJECTS	1024
#define KPS_OBJECT_PATH	224

struct kps_object {
	uint64_t start, end, offset;
	uint32_t pid;
	uint8_t ready;
	char pad[3];
	char path[KPS_OBJECT_PATH];
};

/* A ring's control block.  head is written by the producer, tail by the
 * consumer, each on its own cache line. */
struct kps_ring {
	uint64_t owner;			/* pid << 32 | tid, 0 = free */
	uint64_t lost;			/* events dropped: ring full */
	uint32_t used;			/* ever claimed: its counter row is live */
	char pad0[64 - 20];
	uint64_t head;
	uint64_t tail_seen;		/* producer's last look at tail: it reads
					 * the consumer's line only when full */
	char pad1[48];
	uint64_t tail;
	char pad2[56];
};

enum kps_event_type { EV_PAD = 1, EV_ENTRY, EV_RETURN, EV_TEXT, EV_PROG, EV_REC_ENTRY,
		       EV_REC_RETURN };

/* record's events without values (EV_REC_ENTRY, EV_REC_RETURN): 16 bytes,
 * the probe's descriptor in 16 bits (KPS_MAX_PROBES fits). */
struct kps_rec_event {
	uint32_t size;			/* 16 */
	uint16_t type;
	uint16_t desc;
	uint64_t time;			/* TSC */
};

/* record's compact events: one 8-byte little-endian word, told from every
 * other record (whose first word, its size, is a multiple of 8) by bit 0:
 *   bit 0 1, bit 1 a return, bits 2-15 the descriptor, bits 16-63 the
 *   TSC's low 48 bits.
 * The upper bits are those of the thread's previous event (in its ring's
 * order): a thread writes the 16-byte kps_rec_event instead whenever they
 * changed, and first in a session. */
#define KPS_REC_COMPACT		1u
#define KPS_REC_COMPACT_RETURN	2u
#define KPS_REC_DESC_SHIFT	2
#define KPS_REC_DESC_MASK	0x3fffu
#define KPS_REC_TIME_SHIFT	16

/* One event in a ring, 8-byte aligned.  vals[] holds the argument values
 * in the order of the probe's ARGs; a return event starts with the entry
 * time.  Then, for each :string argument in order, a 16-bit length (or
 * KPS_STR_FAULT) and that many bytes.  With stacks (config "stack N"),
 * reserved's bits from KPS_STACK_SHIFT up hold the number of frames (at
 * most N) and the record's last that many 8-byte words are their
 * addresses, innermost first.
 *
 * An EV_TEXT record is a line a loaded module printed (kprobe_printk):
 * desc and nvals 0, reserved the line's length in bytes, the bytes after
 * the header (no newline, not terminated).
 *
 * An EV_PROG record is an event of a probe program (printf, print, clear,
 * exit...): nvals its type (the language's enum lang_event), desc its id
 * (a format or map number), reserved the length of its data, which
 * follows the header (at most KPS_PROG_DATA_MAX bytes). */
struct kps_event {
	uint32_t size;			/* whole record, multiple of 8 */
	uint16_t type;			/* enum kps_event_type */
	uint16_t nvals;
	uint32_t desc;
	uint32_t reserved;		/* EV_ENTRY, EV_RETURN: frames of the
					 * stack << KPS_STACK_SHIFT, and bit i
					 * (i < KPS_STACK_SHIFT) set when
					 * argument i could not be read */
	uint64_t time_ns;		/* CLOCK_MONOTONIC, or TSC (header) */
	uint64_t vals[];
};

#define KPS_STACK_SHIFT	16		/* reserved: faults below, frames above */

_Static_assert(KPS_MAX_PROBES <= 65536, "kps_rec_event: a descriptor in 16 bits");
_Static_assert(KPS_MAX_PROBES <= KPS_REC_DESC_MASK + 1, "compact event: a descriptor in 14 bits");
#define KPS_STR_FAULT	0xffff
#define KPS_STR_MAX	128		/* bytes of a string argument kept */
#define KPS_TEXT_MAX	1024		/* bytes of an EV_TEXT line */
#define KPS_PROG_DATA_MAX	8192		/* bytes of an EV_PROG record's data */
#define KPS_STACK_MAX		127		/* frames of a stack kept per hit */
#define KPS_STACK_DEFAULT	32

/* ---- layout ---- */

#define KPS_PAGE 4096ul
#define KPS_ALIGN(x) (((x) + KPS_PAGE - 1) & ~(KPS_PAGE - 1))

static inline size_t kps_off_desc(void)
{
	return KPS_ALIGN(sizeof(struct kps_header));
}

static inline size_t kps_off_rings(void)
{
	return kps_off_desc() + KPS_ALIGN((size_t)KPS_MAX_PROBES * sizeof(struct kps_desc));
}

static inline size_t kps_off_ring_data(void)
{
	return kps_off_rings() + KPS_ALIGN((size_t)KPS_RINGS * sizeof(struct kps_ring));
}

static inline size_t kps_off_counters(void)
{
	return kps_off_ring_data() + (size_t)KPS_RINGS * KPS_RING_BYTES;
}

static inline size_t kps_off_hist(void)
{
	return kps_off_counters() +
	       KPS_ALIGN((size_t)(KPS_RINGS + 1) * KPS_MAX_PROBES * sizeof(uint64_t));
}

static inline size_t kps_off_objects(void)
{
	return kps_off_hist() + KPS_ALIGN((size_t)(KPS_RINGS + 1) * KPS_BUCKETS * sizeof(uint64_t));
}

static inline size_t kps_size(void)
{
	return kps_off_objects() + KPS_ALIGN((size_t)KPS_OBJECTS * sizeof(struct kps_object));
}

/* A probe program's session (kprobe run) has two more parts after those,
 * each page-aligned: the program image the CLI compiled (the agent copies
 * it out and verifies it before any use) and the region of the program's
 * maps, which the agent writes and the CLI reads.  The config gives both
 * sizes ("program IMAGE REGION"); a session without a program has neither. */
#define KPS_IMAGE_MAX	(64ul << 20)
#define KPS_REGION_MAX	(64ull << 30)

static inline size_t kps_off_image(void)
{
	return kps_size();
}

static inline size_t kps_off_region(size_t image_len)
{
	return kps_off_image() + KPS_ALIGN(image_len);
}

/* The whole session memory; image_len 0: no program. */
static inline size_t kps_total_size(size_t image_len, size_t region_len)
{
	return image_len ? kps_off_region(image_len) + KPS_ALIGN(region_len) : kps_size();
}

/* Typed views of a mapped session. */
struct kps_map {
	void *base;
	struct kps_header *hdr;
	struct kps_desc *desc;
	struct kps_ring *rings;
	unsigned char *ring_data;	/* ring i at ring_data + i * KPS_RING_BYTES */
	uint64_t *counters;		/* row r (0..KPS_RINGS) at r * KPS_MAX_PROBES */
	uint64_t *hist;			/* row r at r * KPS_BUCKETS */
	struct kps_object *objects;	/* KPS_OBJECTS */
};

static inline void kps_map_views(struct kps_map *m, void *base)
{
	m->base = base;
	m->hdr = (struct kps_header *)base;
	m->desc = (struct kps_desc *)((char *)base + kps_off_desc());
	m->rings = (struct kps_ring *)((char *)base + kps_off_rings());
	m->ring_data = (unsigned char *)base + kps_off_ring_data();
	m->counters = (uint64_t *)((char *)base + kps_off_counters());
	m->hist = (uint64_t *)((char *)base + kps_off_hist());
	m->objects = (struct kps_object *)((char *)base + kps_off_objects());
}

/* The log2 bucket of a duration: 0 holds 0..1 ns, k >= 1 holds [2^k, 2^(k+1)). */
static inline unsigned int kps_bucket(uint64_t ns)
{
	return ns < 2 ? 0 : 63u - (unsigned int)__builtin_clzll(ns);
}

#endif
