/* A session in the agent: map the CLI's shared memory, resolve the probes,
 * register them all or none, and remove them again. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "kp_arch.h"
#include "agent.h"
#include "agent_register.h"
#include "agent_resolve.h"

pthread_mutex_t agent_lock = PTHREAD_MUTEX_INITIALIZER;
struct agent_session *agent_session;
static unsigned int next_gen = 1;

/* The session memory's descriptor as the config names it: "fd:N",
 * inherited from the CLI by a launched command, or "passed" with the ARM
 * request.  *keep: stay open for exec'd children (a followed command). */
static int session_fd(struct agent_session *s, int passed, bool *keep, struct agent_fail *f)
{
	const char *ref = s->cfg.shm;
	char *end;
	long n;

	*keep = false;
	if (!strcmp(ref, "passed")) {
		if (passed < 0)
			return agent_fail(f, 1, -EBADF, "no session memory came with the request");
		return passed;
	}
	if (passed >= 0)
		close(passed);
	if (strncmp(ref, "fd:", 3) || ref[3] < '0' || ref[3] > '9')
		return agent_fail(f, 1, -EINVAL, "unknown session memory '%.32s'", ref);
	errno = 0;
	n = strtol(ref + 3, &end, 10);
	if (errno || *end || n > INT32_MAX)
		return agent_fail(f, 1, -EINVAL, "unknown session memory '%.32s'", ref);
	*keep = s->cfg.follow;
	return (int)n;
}

static uint64_t st_ino_of(int fd)
{
	struct stat st;

	return fstat(fd, &st) ? 0 : (uint64_t)st.st_ino;
}

/* The CLI's memory: sealed at the session's size (nobody can shrink it
 * under a mapping). */
static int check_shm_fd(int fd, size_t size)
{
	struct stat st;
	int seals = fcntl(fd, F_GET_SEALS);
	const int need = F_SEAL_SHRINK | F_SEAL_GROW;

	if (fstat(fd, &st))
		return -errno;
	if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size != size || seals < 0 ||
	    (seals & need) != need)
		return -EPROTO;
	return 0;
}

static int map_shm(struct agent_session *s, int passed, struct agent_fail *f)
{
	bool keep;
	int fd = session_fd(s, passed, &keep, f), rc;
	void *base;

	if (fd < 0)
		return fd;
	s->map_size = kps_total_size(s->cfg.image_len, s->cfg.region_len);
	rc = check_shm_fd(fd, s->map_size);
	if (rc) {
		if (!keep)
			close(fd);
		return agent_fail(f, 1, rc, "the session memory is not the tool's: %s",
				  strerror(-rc));
	}
	base = mmap(NULL, s->map_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
	rc = -errno;
	if (keep) {
		s->shm_fd = fd;
		s->shm_ino = st_ino_of(fd);
	} else {
		close(fd);
	}
	if (base == MAP_FAILED)
		return agent_fail(f, 1, rc, "cannot map the session memory: %s", strerror(-rc));
	kps_map_views(&s->map, base);
	if (s->map.hdr->magic != KPS_MAGIC || s->map.hdr->max_probes != KPS_MAX_PROBES ||
	    !s->map.hdr->nrings || s->map.hdr->nrings > KPS_RINGS ||
	    s->map.hdr->ring_bytes != KPS_RING_BYTES) {
		munmap(base, s->map_size);
		s->map.base = NULL;
		return agent_fail(f, 1, -EPROTO, "the session memory has another layout "
				  "(kprobe and its agent are from different builds)");
	}
	s->nrings = s->map.hdr->nrings;
	return 0;
}

/* TSC time stamps when the CLI found the TSC invariant.  Latency needs ns
 * in the handler: the tick length comes from the CLI's reading of both
 * clocks when it made the session and ours now (at least 1 ms apart, so
 * the error is far below a log2 bucket). */
static void setup_clock(struct agent_session *s)
{
	const struct kps_header *h = s->map.hdr;
	struct timespec ts;
	uint64_t ns, tsc;

	/* A full ring is waited for a few seconds at most (any TSC rate). */
	s->wait_ticks = kp_cycles_wait_limit();
	if (!h->time_tsc)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	tsc = kp_cycles();
	ns = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (s->cfg.action == ACT_LATENCY || s->cfg.action == ACT_RUN) {
		if (ns < h->ns_base + 1000000 || tsc <= h->tsc_base)
			return;
		s->tick_ns_q32 = (uint64_t)(((unsigned __int128)(ns - h->ns_base) << 32) /
					    (tsc - h->tsc_base));
	}
	s->time_tsc = true;
}

static void session_free(struct agent_session *s)
{
	agent_prog_free(s);
	agent_stacks_free(s);
	for (int i = 0; i < s->nprobes; i++) {
		free(s->probes[i]->exits);
		free(s->probes[i]);
	}
	free(s->probes);
	free(s->deferred);
	if (s->map.base)
		munmap(s->map.base, s->map_size);
	/* Unless the program has closed it and reused the number. */
	if (s->shm_fd >= 0 && st_ino_of(s->shm_fd) == s->shm_ino)
		close(s->shm_fd);
	config_free(&s->cfg);
	free(s);
}

static int add_deferred(struct agent_session *s, int spec, const char *path)
{
	struct agent_deferred *v = realloc(s->deferred, (size_t)(s->ndeferred + 1) * sizeof(*v));

	if (!v)
		return -ENOMEM;
	s->deferred = v;
	v[s->ndeferred].spec = spec;
	snprintf(v[s->ndeferred].path, sizeof(v[s->ndeferred].path), "%s", path);
	s->ndeferred++;
	return 0;
}

/* A recording leaves the toolchain's own functions out of whole objects;
 * a program's globs probe every name, and its functions that do not exist
 * are skipped (as bpftrace skips them). */
static unsigned resolve_flags(const struct agent_session *s)
{
	if (s->cfg.action == ACT_RECORD)
		return AGENT_RESOLVE_OWN_CODE;
	return s->cfg.action == ACT_RUN ? AGENT_RESOLVE_EACH_NAME | AGENT_RESOLVE_MISSING_OK : 0;
}

/* Resolves every spec; an error is fatal unless we are a follower (an
 * exec'd child whose program may simply not have that function).  A
 * program's function that does not exist is skipped, unless nothing is
 * left to attach: then the first such is the error. */
static int resolve_all(struct agent_session *s, struct resolve_list *pts, struct agent_fail *f)
{
	char missing[512] = "";

	for (int i = 0; i < s->cfg.nspecs; i++) {
		char path[512], err[512];
		int rc = agent_resolve(&s->cfg.specs[i], i, pts, path, sizeof(path), err,
				       sizeof(err), resolve_flags(s));

		if (rc == AGENT_RESOLVED_NOTHING) {
			if (!missing[0])
				snprintf(missing, sizeof(missing), "%s", err);
			continue;
		}
		if (rc == 1)
			rc = add_deferred(s, i, path);
		if (rc < 0 && !s->follower)
			return agent_fail(f, rc == -ENOMEM ? 1 : 2, rc, "%s", err);
	}
	if (missing[0] && !pts->n && !s->ndeferred && !s->follower &&
	    !(s->prog && agent_prog_has_special(s->prog)))
		return agent_fail(f, 2, -ENOENT, "%s", missing);
	return 0;
}

static void report_failure(struct agent_session *s, const struct agent_fail *f)
{
	struct kps_header *h = s->map.hdr;

	snprintf(h->error, sizeof(h->error), "%s", f->msg);
	h->error_kind = f->kind;
	__atomic_store_n(&h->status, KPS_FAILED, __ATOMIC_RELEASE);
}

/* `kprobe load`: the module's init runs with the session published, so
 * that its kprobe_printk lines reach the tool; its probes are optimized
 * before we report ready.  A follower (an exec'd child) loads no module:
 * it is a different program. */
static int start_module(struct agent_session *s, struct agent_fail *f)
{
	char msg[KPS_MSG];
	int rc;

	if (s->follower)
		return 0;
	__atomic_store_n(&agent_session, s, __ATOMIC_RELEASE);
	rc = agent_module_load(&s->cfg, msg, sizeof(msg));
	if (rc) {
		__atomic_store_n(&agent_session, NULL, __ATOMIC_RELEASE);
		return agent_fail(f, 1, rc, "%s", msg);
	}
	agent_optimize_now();
	return 0;
}

int agent_session_start(const char *config, int shm_fd, bool follower, char *err,
			size_t errlen, int *kind)
{
	struct agent_session *s = calloc(1, sizeof(*s));
	struct resolve_list pts = { 0 };
	struct agent_fail f = { err, errlen, 1 };
	uint32_t expect = KPS_INIT;
	int rc;

	pthread_mutex_lock(&agent_lock);
	if (!s) {
		rc = agent_fail(&f, 1, -ENOMEM, "out of memory");
		goto out;
	}
	s->shm_fd = -1;
	if (agent_session) {
		rc = agent_fail(&f, 1, -EBUSY, "another kprobe session is using process %d",
				getpid());
		goto out;
	}
	rc = config_parse(config, &s->cfg, err, errlen);
	if (rc) {
		f.kind = 2;
		goto out;
	}
	rc = map_shm(s, shm_fd, &f);
	shm_fd = -1;
	if (rc)
		goto out;
	s->follower = follower;
	if (!follower) {
		if (!__atomic_compare_exchange_n(&s->map.hdr->status, &expect, KPS_LOADING, false,
						 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
			rc = agent_fail(&f, 1, -EBUSY, "the session memory is already in use");
			goto out;
		}
		s->map.hdr->agent_pid = getpid();
	}
	s->gen = __atomic_fetch_add(&next_gen, 1, __ATOMIC_RELAXED);
	setup_clock(s);
	agent_stacks_start(s);
	if (s->cfg.watch_len) {
		rc = agent_watch_start(s, &f);
	} else {
		rc = s->cfg.action == ACT_RUN ? agent_prog_start(s, &f) : 0;
		if (!rc)
			rc = resolve_all(s, &pts, &f);
		if (!rc)
			rc = agent_register_first(s, &pts, &f);
	}
	if (!rc && s->ndeferred && agent_dlhook_install())
		rc = agent_fail(&f, 1, -ENOSYS, "cannot watch for objects loaded later "
				"(no _dl_debug_state in the dynamic loader)");
	/* best effort: a static program loads nothing later */
	if (!rc && agent_stacks_wanted(s))
		(void)agent_dlhook_install();
	if (!rc && s->cfg.module)
		rc = start_module(s, &f);
	if (!rc && s->prog)
		rc = agent_prog_armed(s, &f);
	if (rc) {
		agent_unregister_probes(s->probes, s->nprobes);
		if (s->prog)
			agent_prog_free(s);
		if (!s->follower)
			report_failure(s, &f);
		goto out;
	}
	agent_loaded_note(&s->map);
	if (!s->follower)
		__atomic_store_n(&s->map.hdr->status, KPS_READY, __ATOMIC_RELEASE);
	agent_session = s;
	s = NULL;
out:
	resolve_list_free(&pts);
	if (shm_fd >= 0)
		close(shm_fd);
	if (s)
		session_free(s);
	if (kind)
		*kind = f.kind;
	pthread_mutex_unlock(&agent_lock);
	return rc;
}

void agent_session_wait_go(void)
{
	struct agent_session *s = agent_session;
	struct timespec ms = { 0, 1000000 };

	/* a program's, or one with stacks: the tool reads the command's
	 * mappings before it can end */
	if (!s || (s->cfg.action != ACT_RUN && !s->cfg.stack_depth) || s->follower)
		return;
	for (int i = 0; i < 2000 && !__atomic_load_n(&s->map.hdr->go, __ATOMIC_ACQUIRE); i++)
		nanosleep(&ms, NULL);
}

static void flush_locked(struct agent_session *s)
{
	for (int i = 0; i < s->nprobes; i++) {
		struct agent_probe *ap = s->probes[i];
		uint64_t missed = ap->tp ? ap->tp->nmissed : ap->u.kp.nmissed;

		if (ap->is_return)
			missed += (uint64_t)ap->u.rp.nmissed;
		for (int k = 0; k < ap->nexits; k++)
			missed += ap->exits[k].kp.nmissed;
		__atomic_store_n(&s->map.desc[ap->desc].missed, missed, __ATOMIC_RELAXED);
	}
}

void agent_session_flush(void)
{
	pthread_mutex_lock(&agent_lock);
	if (agent_session)
		flush_locked(agent_session);
	pthread_mutex_unlock(&agent_lock);
}

/* The server thread publishes the missed counts every so often; a
 * program that ends between two of those would report the hits its last
 * moments missed (reentrant hits: in a signal handler that interrupted a
 * handler) as neither hits nor misses.  The last counts, as it exits, on
 * the program's thread: quiet, so that the lock it takes does not count
 * as the program's call. */
__attribute__((destructor)) static void flush_at_exit(void)
{
	bool quiet = kprobes_quiet_begin() == 0;

	agent_session_flush();
	if (quiet)
		kprobes_quiet_end();
}

void agent_session_stop(void)
{
	struct agent_session *s;

	pthread_mutex_lock(&agent_lock);
	s = agent_session;
	if (s) {
		/* A module's exit unregisters its probes and may print. */
		agent_module_unload();
		agent_dlhook_remove();
		agent_watch_stop(s);
		agent_unregister_probes(s->probes, s->nprobes);
		/* END after the last hit: its output and the maps are final. */
		agent_prog_end(s);
		flush_locked(s);
		agent_session = NULL;
		session_free(s);
	}
	pthread_mutex_unlock(&agent_lock);
}

/* Called by the dlopen hook in the thread that loaded an object. */
void agent_session_note_objects(void)
{
	pthread_mutex_lock(&agent_lock);
	if (agent_session)
		agent_loaded_note(&agent_session->map);
	pthread_mutex_unlock(&agent_lock);
}

void agent_session_arm_deferred(void)
{
	struct agent_session *s;
	struct resolve_list pts = { 0 };
	char err[512];
	struct agent_fail f = { err, sizeof(err), 1 };

	pthread_mutex_lock(&agent_lock);
	s = agent_session;
	if (!s || !s->ndeferred)
		goto out;
	for (int i = 0; i < s->ndeferred;) {
		struct agent_deferred *d = &s->deferred[i];
		char path[512];

		if (!agent_object_loaded(d->path) &&
		    !agent_object_loaded(s->cfg.specs[d->spec].object)) {
			i++;
			continue;
		}
		agent_resolve(&s->cfg.specs[d->spec], d->spec, &pts, path, sizeof(path), err,
			      sizeof(err), resolve_flags(s));
		*d = s->deferred[--s->ndeferred];
	}
	if (pts.n) {
		bool follower = s->follower;

		/* Best effort: nobody is left to report an error to. */
		s->follower = true;
		agent_register_points(s, &pts, &f);
		s->follower = follower;
	}
out:
	resolve_list_free(&pts);
	pthread_mutex_unlock(&agent_lock);
}
