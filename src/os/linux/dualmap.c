#include "os/linux/dualmap.h"

#include <errno.h>
#include <sys/mman.h>
#include <unistd.h>

int kp_dualmap_create(struct kp_dualmap *m, size_t len)
{
	void *rw = MAP_FAILED, *rx = MAP_FAILED;
	int fd, err = 0;

	fd = memfd_create("libkprobes-code", MFD_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (ftruncate(fd, (off_t)len)) {
		err = -errno;
		goto out;
	}
	rw = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (rw == MAP_FAILED) {
		err = -errno;
		goto out;
	}
	rx = mmap(NULL, len, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);
	if (rx == MAP_FAILED) {
		err = -errno;
		munmap(rw, len);
		goto out;
	}
	m->rw = rw;
	m->rx = rx;
	m->len = len;
out:
	/* the mappings keep the pages; no descriptor is left for the
	 * program to see */
	close(fd);
	return err;
}
