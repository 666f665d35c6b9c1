/* Internal resource counters (not part of the public API): what the library
 * holds right now.  Used by the soak test to prove nothing leaks. */
#ifndef KP_CORE_STATS_H
#define KP_CORE_STATS_H

struct kp_stats {
	unsigned long probepoints;	/* registered or waiting to be freed */
	unsigned long xol_slots;	/* out-of-line slots in use */
	unsigned long retired_slots;	/* of those, quarantined */
	unsigned long detours;		/* detour buffers in use */
	unsigned long rp_pools;		/* kretprobe instance pools */
	/* Bytes allocated for structures kept for good once made (the
	 * executable pools' bookkeeping and unwind tables): these grow to a
	 * high-water mark and are not leaks. */
	unsigned long kept_bytes;
};

void kp_get_stats(struct kp_stats *st);
/* Frees the quarantined slots no thread can be in (census); how many. */
int kp_reclaim_now(void);

#endif
