/* kprobe record: the per-thread rings go, byte for byte, to one file per
 * thread under the data directory; nothing is decoded while the target
 * runs (report, replay and dump read the files, and check everything).
 *
 *   DIR/info          the time base and how many events were lost
 *   DIR/descs         one line per probe point: id, kind, pid, address,
 *                     spec index, object, name, declared arguments
 *   DIR/specs         one line per PROBE: index and canonical text (the
 *                     arguments' names and types)
 *   DIR/PID-TID.dat   the thread's events as the agent wrote them
 *                     (struct kps_event records, padding included)
 *
 * The writer waits for ring space by default (shm.h), so the reader must
 * keep up: a busy round is followed at once by another, and the bytes go
 * from the shared ring to the file with one write() each. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dwarf_vars.h"
#include "kp_arch.h"
#include "record.h"

#define RECORD_VERSION 1
/* One drain call reads rounds for at most this long, so that the caller
 * still sees the command exit and the stop signals. */
#define DRAIN_SLICE_NS 50000000ull
#define IDLE_NS 2000000ull
/* While a thread is busy its ring is written out in pieces of at least
 * this many bytes: a write per few kilobytes made the reader, not the
 * target, set the pace.  The rest is written when the burst ends. */
#define DRAIN_BATCH (64u << 10)

struct thread_file {
	uint64_t owner;			/* pid << 32 | tid, 0: free slot */
	int fd;				/* -1: closed (reopened to append) */
};

struct recorder {
	char dir[PATH_MAX];
	int dirfd;
	struct thread_file *files;	/* open addressing by owner */
	size_t nfiles, cap;
	uint64_t bytes;
	uint64_t corrupt;
	bool cleared;			/* an earlier recording's files removed */
};

static struct recorder rec;

/* Refuses a directory that holds something other than a recording and,
 * with remove, removes what an earlier recording left in it (our file
 * names only). */
static void clear_old_recording(int dfd, const char *dir, bool remove)
{
	DIR *d = fdopendir(dup(dfd));
	struct dirent *e;
	bool ours = faccessat(dfd, "info", F_OK, 0) == 0;
	bool other = false;

	if (!d)
		cli_die(EXIT_FAIL, "cannot read %s: %s", dir, strerror(errno));
	/* The duplicate shares dfd's position, at the end after a first read. */
	rewinddir(d);
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (!strcmp(e->d_name, "info") || !strcmp(e->d_name, "descs") ||
		    !strcmp(e->d_name, "specs") || (n > 4 && !strcmp(e->d_name + n - 4, ".dat"))) {
			if (ours && remove)
				unlinkat(dfd, e->d_name, 0);
		} else {
			other = true;
		}
	}
	closedir(d);
	if (!ours && other)
		cli_die(EXIT_FAIL, "%s exists and is not a kprobe recording", dir);
}

void record_open(struct session *s)
{
	const char *dir = s->opts->data_dir;

	memset(&rec, 0, sizeof(rec));
	snprintf(rec.dir, sizeof(rec.dir), "%s", dir);
	if (mkdir(dir, 0755) && errno != EEXIST)
		cli_die(EXIT_FAIL, "cannot create %s: %s", dir, strerror(errno));
	rec.dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rec.dirfd < 0)
		cli_die(EXIT_FAIL, "cannot open %s: %s", dir, strerror(errno));
	/* Checked now, replaced only once this recording writes: a session
	 * that fails before (a bad probe, a command that cannot run) leaves
	 * the earlier recording as it was. */
	clear_old_recording(rec.dirfd, dir, false);
	rec.cap = 64;
	rec.files = calloc(rec.cap, sizeof(*rec.files));
	if (!rec.files)
		cli_die(EXIT_FAIL, "out of memory");
}

static size_t slot_of(uint64_t owner, size_t cap)
{
	return (size_t)((owner * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static int grow_files(void)
{
	struct thread_file *old = rec.files;
	size_t oldcap = rec.cap, cap = rec.cap * 2;
	struct thread_file *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < oldcap; i++) {
		size_t j;

		if (!old[i].owner)
			continue;
		for (j = slot_of(old[i].owner, cap); v[j].owner; j = (j + 1) & (cap - 1))
			;
		v[j] = old[i];
	}
	free(old);
	rec.files = v;
	rec.cap = cap;
	return 0;
}

/* Out of descriptors: close every file (each is reopened to append). */
static void close_all_files(void)
{
	for (size_t i = 0; i < rec.cap; i++)
		if (rec.files[i].owner && rec.files[i].fd >= 0) {
			close(rec.files[i].fd);
			rec.files[i].fd = -1;
		}
}

static void replace_old_recording(void)
{
	if (rec.cleared)
		return;
	clear_old_recording(rec.dirfd, rec.dir, true);
	rec.cleared = true;
}

static int open_thread_file(uint64_t owner)
{
	char name[64];
	int fd;

	replace_old_recording();
	snprintf(name, sizeof(name), "%u-%u.dat", (unsigned int)(owner >> 32),
		 (unsigned int)(uint32_t)owner);
	fd = openat(rec.dirfd, name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0 && (errno == EMFILE || errno == ENFILE)) {
		close_all_files();
		fd = openat(rec.dirfd, name, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	}
	return fd < 0 ? -errno : fd;
}

/* The file of the thread that owns a ring. */
static int file_of(uint64_t owner)
{
	size_t j;

	if (rec.nfiles * 2 >= rec.cap && grow_files())
		return -ENOMEM;
	for (j = slot_of(owner, rec.cap); rec.files[j].owner; j = (j + 1) & (rec.cap - 1))
		if (rec.files[j].owner == owner)
			break;
	if (!rec.files[j].owner) {
		rec.files[j].owner = owner;
		rec.files[j].fd = -1;
		rec.nfiles++;
	}
	if (rec.files[j].fd < 0)
		rec.files[j].fd = open_thread_file(owner);
	return rec.files[j].fd;
}

static void write_or_die(struct session *s, int fd, const void *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			/* The target must not wait for a reader that is gone. */
			__atomic_store_n(&s->map.hdr->drop, 1, __ATOMIC_RELEASE);
			cli_die(EXIT_FAIL, "cannot write the recording in %s: %s", rec.dir,
				w < 0 ? strerror(errno) : "short write");
		}
		p = (const char *)p + w;
		n -= (size_t)w;
	}
}

/* Moves ring i's new bytes to its thread's file, when there are at least
 * min of them; returns how many. */
static size_t drain_ring(struct session *s, uint32_t i, uint64_t min)
{
	struct kps_ring *r = &s->map.rings[i];
	const unsigned char *data = s->map.ring_data + (size_t)i * KPS_RING_BYTES;
	uint64_t owner = __atomic_load_n(&r->owner, __ATOMIC_ACQUIRE);
	uint64_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
	uint64_t tail = s->cons.tails[i], n;
	uint32_t pos;
	int fd;

	if (head == tail || (head - tail < min && head - tail <= KPS_RING_BYTES))
		return 0;
	/* A producer is never more than a ring ahead, and moves in whole
	 * records of 8-byte multiples. */
	if (head - tail > KPS_RING_BYTES || (head - tail) % 8 || !owner) {
		rec.corrupt++;
		goto done;
	}
	fd = file_of(owner);
	if (fd < 0) {
		__atomic_store_n(&s->map.hdr->drop, 1, __ATOMIC_RELEASE);
		cli_die(EXIT_FAIL, "cannot write the recording in %s: %s", rec.dir, strerror(-fd));
	}
	pos = (uint32_t)(tail & (KPS_RING_BYTES - 1));
	n = head - tail;
	if (n > KPS_RING_BYTES - pos) {
		write_or_die(s, fd, data + pos, KPS_RING_BYTES - pos);
		write_or_die(s, fd, data, n - (KPS_RING_BYTES - pos));
	} else {
		write_or_die(s, fd, data + pos, n);
	}
	rec.bytes += n;
done:
	s->cons.tails[i] = head;
	__atomic_store_n(&r->tail, head, __ATOMIC_RELEASE);
	return head - tail;
}

static size_t drain_round(struct session *s, uint64_t min)
{
	uint32_t n = consumer_rings_claimed(&s->cons);
	size_t work = 0;

	for (uint32_t i = 0; i < n; i++)
		if (__atomic_load_n(&s->map.rings[i].used, __ATOMIC_ACQUIRE))
			work += drain_ring(s, i, min);
	return work;
}

bool record_drain(struct session *s)
{
	unsigned long long now = cli_now_ns(), until = now + DRAIN_SLICE_NS, last_work = now;
	size_t work, total = 0;

	consumer_free_dead_rings(&s->cons);
	/* While the target is busy, keep reading (a ring holds well under a
	 * millisecond of a busy thread's events, and its thread waits for us
	 * when it is full); go back to the caller's slower polling once no
	 * event came for IDLE_NS. */
	do {
		work = drain_round(s, DRAIN_BATCH);
		total += work;
		now = cli_now_ns();
		if (work)
			last_work = now;
		else
			usleep(20);
	} while (now < until && now - last_work < IDLE_NS);
	/* what is left of the burst, before the caller's slower polling */
	total += drain_round(s, 0);
	return total > 0;
}

/* ns per TSC tick over the whole session (both clocks read now). */
static double tick_rate(const struct session *s)
{
	unsigned long long ns = cli_now_ns();
	uint64_t tsc = kp_cycles();

	if (!s->cons.time_tsc || tsc <= s->cons.tsc_base || ns <= s->cons.ns_base)
		return 1.0;
	return (double)(ns - s->cons.ns_base) / (double)(tsc - s->cons.tsc_base);
}

static FILE *create_text(const char *name)
{
	int fd = openat(rec.dirfd, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	FILE *f = fd < 0 ? NULL : fdopen(fd, "w");

	if (!f)
		cli_die(EXIT_FAIL, "cannot write %s/%s: %s", rec.dir, name, strerror(errno));
	return f;
}

static void close_text(FILE *f, const char *name)
{
	if (ferror(f) | fclose(f))
		cli_die(EXIT_FAIL, "cannot write %s/%s", rec.dir, name);
}

/* The probe points, from the checked copies the consumer makes. */
static void write_descs(struct session *s)
{
	uint64_t n = __atomic_load_n(&s->map.hdr->ndesc, __ATOMIC_ACQUIRE);
	FILE *f = create_text("descs");

	if (n > KPS_MAX_PROBES)
		n = KPS_MAX_PROBES;
	for (uint64_t id = 0; id < n; id++) {
		const struct kps_desc *d = consumer_desc(&s->cons, id);

		if (d)
			fprintf(f, "%lu\t%u\t%u\t%#lx\t%u\t%s\t%s\t%s\n", (unsigned long)id,
				d->kind, d->pid, (unsigned long)d->addr, d->spec,
				d->object[0] ? d->object : "-", d->name, d->args);
	}
	close_text(f, "descs");
	f = create_text("specs");
	for (int i = 0; i < s->opts->nspecs; i++)
		fprintf(f, "%d\t%s\n", i, s->opts->specs[i].text);
	close_text(f, "specs");
}

/* Calls whose return was not recorded because their return probe had no
 * instance free (deeper recursion, or more threads inside a function at
 * once, than its instances): the probes' missed counts as the agent last
 * copied them. */
static uint64_t missed_returns(struct session *s)
{
	uint64_t n = __atomic_load_n(&s->map.hdr->ndesc, __ATOMIC_ACQUIRE), missed = 0;

	if (n > KPS_MAX_PROBES)
		n = KPS_MAX_PROBES;
	for (uint64_t id = 0; id < n; id++) {
		const struct kps_desc *d = consumer_desc(&s->cons, id);

		if (d && d->kind == DESC_RETURN)
			missed += __atomic_load_n(&s->map.desc[id].missed, __ATOMIC_RELAXED);
	}
	return missed;
}

void record_finish(struct session *s)
{
	uint64_t full, after, ringless, missed;
	FILE *f;

	while (drain_round(s, 0))
		;
	replace_old_recording();
	write_descs(s);
	session_split_losses(s, &full, &after);
	ringless = consumer_lost_ringless(&s->cons);
	missed = missed_returns(s);
	f = create_text("info");
	fprintf(f, "kprobe-record %d\n", RECORD_VERSION);
	fprintf(f, "time_tsc %d\n", s->cons.time_tsc ? 1 : 0);
	fprintf(f, "tsc_base %lu\n", (unsigned long)s->cons.tsc_base);
	fprintf(f, "ns_base %lu\n", (unsigned long)s->cons.ns_base);
	fprintf(f, "ns_per_tick %.17g\n", tick_rate(s));
	fprintf(f, "lost_full %lu\n", (unsigned long)full);
	fprintf(f, "lost_ringless %lu\n", (unsigned long)ringless);
	fprintf(f, "after_end %lu\n", (unsigned long)after);
	fprintf(f, "corrupt %lu\n", (unsigned long)rec.corrupt);
	fprintf(f, "bytes %lu\n", (unsigned long)rec.bytes);
	fprintf(f, "missed_returns %lu\n", (unsigned long)missed);
	close_text(f, "info");
	close_all_files();
	free(rec.files);
	rec.files = NULL;
	close(rec.dirfd);
	if (after)
		cli_warn("discarded %lu events that came after the end of recording",
			 (unsigned long)after);
	if (full)
		cli_warn("lost %lu events (a buffer was full%s)", (unsigned long)full,
			 s->opts->drop ? " and --drop was given" :
					 ": the tool did not read it for seconds");
	if (ringless)
		cli_warn("lost %lu events (threads beyond the session's %u buffers had none)",
			 (unsigned long)ringless, (unsigned int)s->cons.nrings);
	if (rec.corrupt)
		cli_warn("skipped %lu corrupt buffer contents (the target wrote over them)",
			 (unsigned long)rec.corrupt);
	if (missed)
		cli_warn("missed the return of at least %lu calls (more of them active at once than "
			 "their return probe's instances: deep recursion or many threads)",
			 (unsigned long)missed);
	fprintf(stderr, "kprobe: recorded %lu bytes of events in %s\n", (unsigned long)rec.bytes,
		rec.dir);
}

/* ---- -F OBJECT: every function's entry and return ---- */

/* The file name of the program: what its ELF object is called. */
static void program_name(const struct cli_opts *o, char *buf, size_t len)
{
	char path[PATH_MAX], real[PATH_MAX];
	const char *cmd, *slash;
	ssize_t n;

	if (o->pid) {
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)o->pid);
		n = readlink(path, real, sizeof(real) - 1);
		if (n <= 0)
			cli_die(EXIT_FAIL, "cannot read the program of process %d: %s", (int)o->pid,
				strerror(errno));
		real[n] = '\0';
	} else {
		cmd = o->command[0];
		if (strchr(cmd, '/')) {
			snprintf(path, sizeof(path), "%s", cmd);
		} else {
			const char *p = getenv("PATH");

			path[0] = '\0';
			while (p && *p) {
				size_t l = strcspn(p, ":");

				snprintf(path, sizeof(path), "%.*s/%s", (int)l, p, cmd);
				if (!access(path, X_OK))
					break;
				path[0] = '\0';
				p += l + (p[l] == ':');
			}
			if (!path[0])
				cli_die(EXIT_BAD, "cannot run '%s': command not found", cmd);
		}
		if (!realpath(path, real))
			snprintf(real, sizeof(real), "%s", path);
	}
	slash = strrchr(real, '/');
	snprintf(buf, len, "%s", slash ? slash + 1 : real);
}

static void add_spec(struct cli_opts *o, const char *text)
{
	char err[600];

	if (o->nspecs == KPROBE_MAX_SPECS)
		cli_die(EXIT_BAD, "too many probes (at most %d)", KPROBE_MAX_SPECS);
	if (spec_parse(text, &o->specs[o->nspecs], err, sizeof(err)))
		cli_die(EXIT_BAD, "%s", err);
	o->nspecs++;
}

void record_expand_objects(struct cli_opts *o)
{
	char name[PATH_MAX], text[PATH_MAX + 16];

	for (int i = 0; i < o->nobjects; i++) {
		const char *obj = o->objects[i];

		if (!strcmp(obj, "main")) {
			program_name(o, name, sizeof(name));
			obj = name;
		}
		if (!*obj || strpbrk(obj, ": \t"))
			cli_die(EXIT_BAD, "bad object '%s' for -F", obj);
		/* -F libc: the library of that short name, as in probes */
		if (obj != name && !cli_short_library(obj, name, sizeof(name)))
			obj = name;
		snprintf(text, sizeof(text), "%s:*", obj);
		add_spec(o, text);
		snprintf(text, sizeof(text), "%s:*%%return", obj);
		add_spec(o, text);
	}
}
