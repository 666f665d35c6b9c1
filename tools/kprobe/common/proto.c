/* The control channel's framing and the session config (see proto.h). */
#include "proto.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const action_names[] = {
	[ACT_TRACE] = "trace", [ACT_COUNT] = "count", [ACT_LATENCY] = "latency",
	[ACT_LOAD] = "load", [ACT_RUN] = "run", [ACT_RECORD] = "record",
};

const char *action_name(enum kps_action a)
{
	return a >= ACT_TRACE && a <= ACT_RECORD ? action_names[a] : "?";
}

char *config_format(const struct session_config *cfg)
{
	size_t cap = 256 + (size_t)cfg->nspecs * (SPEC_TEXT_MAX + 24);
	char *buf, *p;

	if (cfg->module)
		cap += strlen(cfg->module) + 8;
	for (int i = 0; i < cfg->nmodargs; i++)
		cap += strlen(cfg->modargs[i]) + 8;
	buf = malloc(cap);
	p = buf;
	if (!buf)
		return NULL;
	p += snprintf(p, cap, "shm %s\naction %s\nfollow %d\n", cfg->shm,
		      action_name(cfg->action), cfg->follow ? 1 : 0);
	for (int i = 0; i < cfg->nspecs; i++) {
		if (cfg->specs[i].sites)
			p += snprintf(p, cap - (size_t)(p - buf), "sites %u\n",
				      (unsigned)cfg->specs[i].sites);
		p += snprintf(p, cap - (size_t)(p - buf), "probe %s\n", cfg->specs[i].text);
	}
	if (cfg->watch_len)
		p += snprintf(p, cap - (size_t)(p - buf), "watch %u %s\n", cfg->watch_len,
			 cfg->watch_rw ? "rw" : "w");
	if (cfg->stack_depth)
		p += snprintf(p, cap - (size_t)(p - buf), "%s %u\n",
			      cfg->stack_count ? "stacks" : "stack", cfg->stack_depth);
	if (cfg->return_probes)
		p += snprintf(p, cap - (size_t)(p - buf), "returns probes\n");
	if (cfg->module)
		p += snprintf(p, cap - (size_t)(p - buf), "module %s\n", cfg->module);
	for (int i = 0; i < cfg->nmodargs; i++)
		p += snprintf(p, cap - (size_t)(p - buf), "modarg %s\n", cfg->modargs[i]);
	if (cfg->image_len)
		p += snprintf(p, cap - (size_t)(p - buf), "program %llu %llu\n",
			      (unsigned long long)cfg->image_len,
			      (unsigned long long)cfg->region_len);
	return buf;
}

static int parse_action(const char *s, enum kps_action *a)
{
	for (int i = ACT_TRACE; i <= ACT_RECORD; i++)
		if (!strcmp(s, action_names[i])) {
			*a = (enum kps_action)i;
			return 0;
		}
	return -EINVAL;
}

/* "module PATH" once, then "modarg ARG" for each of its ARGs.  A module
 * ARG may be empty: "modarg " has nothing after the space. */
static int config_module_line(const char *item, const char *val, struct session_config *cfg,
			      char *err, size_t errlen)
{
	char **v;

	if (!strcmp(item, "module")) {
		if (cfg->module || !val[0]) {
			snprintf(err, errlen, "bad module item");
			return -EINVAL;
		}
		cfg->module = strdup(val);
		return cfg->module ? 0 : -ENOMEM;
	}
	if (!cfg->module || cfg->nmodargs == KPROBE_MAX_MODARGS) {
		snprintf(err, errlen, "bad or too many module arguments (at most %d)",
			 KPROBE_MAX_MODARGS);
		return -EINVAL;
	}
	v = realloc(cfg->modargs, (size_t)(cfg->nmodargs + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	cfg->modargs = v;
	v[cfg->nmodargs] = strdup(val);
	if (!v[cfg->nmodargs])
		return -ENOMEM;
	cfg->nmodargs++;
	return 0;
}

/* "program IMAGE REGION": sizes within the session memory's limits. */
static int config_program_line(const char *val, struct session_config *cfg, char *err,
			       size_t errlen)
{
	unsigned long long image, region;
	int end = 0;

	if (sscanf(val, "%llu %llu%n", &image, &region, &end) != 2 || val[end] || !image ||
	    image > KPS_IMAGE_MAX || region > KPS_REGION_MAX || cfg->image_len) {
		snprintf(err, errlen, "bad program item '%.64s'", val);
		return -EINVAL;
	}
	cfg->image_len = image;
	cfg->region_len = region;
	return 0;
}

/* "sites N": the next probe line is the first of the N specs of one probe
 * of the program (the agent checks N against the probes that follow). */
static int config_sites_line(const char *val, struct session_config *cfg, char *err,
			    size_t errlen)
{
	unsigned int n;
	int end = 0;

	if (sscanf(val, "%u%n", &n, &end) != 1 || val[end] || !n || n > KPROBE_MAX_SPECS ||
	    cfg->nspecs == KPROBE_MAX_SPECS || cfg->specs[cfg->nspecs].sites) {
		snprintf(err, errlen, "bad sites item '%.64s'", val);
		return -EINVAL;
	}
	cfg->specs[cfg->nspecs].sites = (uint16_t)n;
	return 0;
}

static int config_line(char *line, struct session_config *cfg, char *err, size_t errlen)
{
	char *val = strchr(line, ' ');
	int rc;

	if (!val) {
		snprintf(err, errlen, "bad config line '%s'", line);
		return -EINVAL;
	}
	*val++ = '\0';
	if (!strcmp(line, "shm")) {
		snprintf(cfg->shm, sizeof(cfg->shm), "%s", val);
		return 0;
	}
	if (!strcmp(line, "action")) {
		if (parse_action(val, &cfg->action)) {
			snprintf(err, errlen, "bad action '%s'", val);
			return -EINVAL;
		}
		return 0;
	}
	if (!strcmp(line, "follow")) {
		cfg->follow = atoi(val) != 0;
		return 0;
	}
	if (!strcmp(line, "watch")) {
		char type[4];
		unsigned int len;

		if (sscanf(val, "%u %3s", &len, type) != 2 || (len != 1 && len != 2 && len != 4 &&
		    len != 8) || (strcmp(type, "w") && strcmp(type, "rw"))) {
			snprintf(err, errlen, "bad watch item '%.40s'", val);
			return -EINVAL;
		}
		cfg->watch_len = len;
		cfg->watch_rw = !strcmp(type, "rw");
		return 0;
	}
	if (!strcmp(line, "returns")) {
		if (strcmp(val, "probes")) {
			snprintf(err, errlen, "bad returns item '%.40s'", val);
			return -EINVAL;
		}
		cfg->return_probes = true;
		return 0;
	}
	if (!strcmp(line, "stack") || !strcmp(line, "stacks")) {
		char *end;
		unsigned long n = strtoul(val, &end, 10);

		if (*end || !n || n > KPS_STACK_MAX || val[0] == '-') {
			snprintf(err, errlen, "bad %s item '%.40s'", line, val);
			return -EINVAL;
		}
		cfg->stack_depth = (unsigned int)n;
		cfg->stack_count = !strcmp(line, "stacks");
		return 0;
	}
	if (!strcmp(line, "probe")) {
		uint16_t sites;

		if (cfg->nspecs == KPROBE_MAX_SPECS) {
			snprintf(err, errlen, "too many probes (at most %d)", KPROBE_MAX_SPECS);
			return -EINVAL;
		}
		/* spec_parse starts from a clean spec: keep the "sites N" mark */
		sites = cfg->specs[cfg->nspecs].sites;
		rc = spec_parse(val, &cfg->specs[cfg->nspecs], err, errlen);
		cfg->specs[cfg->nspecs++].sites = sites;
		return rc;
	}
	if (!strcmp(line, "sites"))
		return config_sites_line(val, cfg, err, errlen);
	if (!strcmp(line, "program"))
		return config_program_line(val, cfg, err, errlen);
	if (!strcmp(line, "module") || !strcmp(line, "modarg"))
		return config_module_line(line, val, cfg, err, errlen);
	snprintf(err, errlen, "unknown config item '%s'", line);
	return -EINVAL;
}

/* What each action needs: probes (trace, count, latency), a module and
 * no probes (load), a program and its probes if any (run). */
static bool config_complete(const struct session_config *cfg)
{
	if (!cfg->shm[0] || !cfg->action)
		return false;
	if (cfg->action == ACT_LOAD)
		return cfg->module && !cfg->nspecs && !cfg->image_len;
	if (cfg->action == ACT_RUN)
		return cfg->image_len && !cfg->module;
	return cfg->nspecs && !cfg->module && !cfg->image_len;
}

int config_parse(const char *text, struct session_config *cfg, char *err, size_t errlen)
{
	char *copy = strdup(text), *save = NULL, *line;
	int rc = 0;

	memset(cfg, 0, sizeof(*cfg));
	cfg->specs = calloc(KPROBE_MAX_SPECS, sizeof(*cfg->specs));
	if (!copy || !cfg->specs) {
		snprintf(err, errlen, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (line = strtok_r(copy, "\n", &save); line && !rc; line = strtok_r(NULL, "\n", &save))
		rc = config_line(line, cfg, err, errlen);
	if (!rc && !config_complete(cfg)) {
		snprintf(err, errlen, "incomplete session config");
		rc = -EINVAL;
	}
out:
	free(copy);
	if (rc)
		config_free(cfg);
	return rc;
}

void config_free(struct session_config *cfg)
{
	free(cfg->specs);
	cfg->specs = NULL;
	cfg->nspecs = 0;
	for (int i = 0; i < cfg->nmodargs; i++)
		free(cfg->modargs[i]);
	free(cfg->modargs);
	free(cfg->module);
	cfg->modargs = NULL;
	cfg->nmodargs = 0;
	cfg->module = NULL;
}

int ctl_dir_path(uid_t uid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "/tmp/.kprobe-%u", (unsigned int)uid);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int ctl_socket_name(pid_t pid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%d.sock", (int)pid);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int ctl_socket_path(pid_t pid, uid_t uid, char *buf, size_t len)
{
	int n = snprintf(buf, len, "/tmp/.kprobe-%u/%d.sock", (unsigned int)uid, (int)pid);

	return n > 0 && (size_t)n < len ? 0 : -ENAMETOOLONG;
}

int ctl_dir_check(int dirfd, uid_t owner)
{
	struct stat st;

	if (fstat(dirfd, &st))
		return -errno;
	if (!S_ISDIR(st.st_mode) || st.st_uid != owner || (st.st_mode & 022))
		return -EPERM;
	return 0;
}

/* "PID.sock" or "PID.sock.new": the PID, or 0 for any other name. */
static pid_t socket_owner(const char *name)
{
	char *end;
	long v;

	if (*name < '1' || *name > '9')
		return 0;
	errno = 0;
	v = strtol(name, &end, 10);
	if (errno || v <= 0 || v > 0x3fffffff)
		return 0;
	return strcmp(end, ".sock") && strcmp(end, ".sock.new") ? 0 : (pid_t)v;
}

int ctl_dir_sweep(int dirfd)
{
	int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	struct dirent *e;
	int removed = 0;

	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	while ((e = readdir(d))) {
		pid_t pid = socket_owner(e->d_name);
		struct stat st;

		/* Only sockets of processes that are gone (EPERM: alive). */
		if (!pid || !kill(pid, 0) || errno != ESRCH)
			continue;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISSOCK(st.st_mode))
			continue;
		if (!unlinkat(dirfd, e->d_name, 0))
			removed++;
	}
	closedir(d);
	return removed;
}

void line_reader_init(struct line_reader *r, int fd)
{
	r->fd = fd;
	r->want_fds = false;
	r->passed_fd = -1;
	r->len = 0;
}

int line_reader_take_fd(struct line_reader *r)
{
	int fd = r->passed_fd;

	r->passed_fd = -1;
	return fd;
}

/* Keeps the first descriptor of an SCM_RIGHTS message (replacing one kept
 * before); closes any others. */
static void keep_passed_fds(struct line_reader *r, struct msghdr *msg)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm; cm = CMSG_NXTHDR(msg, cm)) {
		size_t n;

		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS ||
		    cm->cmsg_len < CMSG_LEN(0))
			continue;
		n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (r->passed_fd >= 0)
				close(r->passed_fd);
			r->passed_fd = fd;
		}
	}
}

/* read(), or with want_fds a recvmsg() that keeps a passed descriptor
 * (close-on-exec).  Without it, the kernel drops anything passed. */
static ssize_t read_some(struct line_reader *r)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(4 * sizeof(int))];
	} u;
	struct iovec iov = { r->buf + r->len, sizeof(r->buf) - r->len };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			      .msg_controllen = sizeof(u.buf) };
	ssize_t n;

	if (!r->want_fds)
		return read(r->fd, r->buf + r->len, sizeof(r->buf) - r->len);
	n = recvmsg(r->fd, &msg, MSG_CMSG_CLOEXEC);
	if (n >= 0)
		keep_passed_fds(r, &msg);
	return n;
}

static int take_line(struct line_reader *r, char *out, size_t outlen)
{
	char *nl = memchr(r->buf, '\n', r->len);
	size_t n;

	if (!nl)
		return 0;
	n = (size_t)(nl - r->buf);
	/* Never cut a line short silently: the peer broke the protocol. */
	if (n >= outlen)
		return -EMSGSIZE;
	memcpy(out, r->buf, n);
	out[n] = '\0';
	memmove(r->buf, nl + 1, r->len - n - 1);
	r->len -= n + 1;
	return 1;
}

int line_read(struct line_reader *r, char *out, size_t outlen, int timeout_ms)
{
	for (;;) {
		struct pollfd pfd = { .fd = r->fd, .events = POLLIN };
		ssize_t n;
		int rc;

		rc = take_line(r, out, outlen);
		if (rc)
			return rc;
		if (r->len == sizeof(r->buf))
			return -EMSGSIZE;
		rc = poll(&pfd, 1, timeout_ms);
		if (rc < 0 && errno == EINTR)
			continue;
		if (rc < 0)
			return -errno;
		if (rc == 0)
			return -ETIMEDOUT;
		n = read_some(r);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return 0;
		r->len += (size_t)n;
	}
}

int write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		/* A peer that went away must not raise SIGPIPE in the target. */
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}
