/* Soak test: the probe structures shared by the handlers and the code that
 * registers them. */
#ifndef SOAK_PROBES_H
#define SOAK_PROBES_H

#include "soak.h"

#ifndef container_of	/* the library's own, where its internals are included */
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

#define SPROBE_MAGIC 0x5354u	/* "ST" */
#define CPROBE_MAGIC 0x4348u	/* "CH" */

/* A probe of any of the three kinds; kp comes first in all of them, so a
 * struct kprobe pointer given to a handler leads back to its container. */
union anyprobe {
	struct kprobe kp;
	struct kretprobe rp;
	struct jprobe jp;
};

/* Steady probe: registered for the whole run, always enabled. */
struct sprobe {
	unsigned int magic;
	const char *what;
	int site;
	char kind;			/* 'k', 'r', 'j' */
	bool post;
	bool clobber;			/* handler writes vector registers and errno */
	bool must_optimize;		/* must be seen jump-optimized at least once */
	union anyprobe u;
	char sym[24];
	unsigned long hits, post_hits, ret_hits;
	unsigned long seen_optimized;
};

enum cstate { C_IDLE, C_REGISTERING, C_LIVE, C_UNREGISTERING };

/* Churn probe: registered, disabled, enabled and removed continuously. */
struct cprobe {
	unsigned int magic;
	int idx;
	int site;
	char kind;
	int state;			/* enum cstate, read by handlers */
	bool post;			/* this interval has a post_handler */
	bool disabled_once;		/* disabled at some point of this interval */
	union anyprobe u;
	char sym[24];
	unsigned long hits, post_hits, ret_hits;
	/* the current interval: hits and counters at its start */
	unsigned long i_hits, i_done_before, i_started_after;
	unsigned long intervals;
};

extern struct sprobe steady[];
extern const int nsteady;
extern struct cprobe churn[];
extern const int nchurn;

/* Handlers (soak_handlers.c). */
int steady_pre(struct kprobe *p, struct pt_regs *regs);
void steady_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags);
int steady_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs);
int steady_rp_ret(struct kretprobe_instance *ri, struct pt_regs *regs);
long steady_jp_entry(long a, long b, long c, long d, long e, long f, long g, long h);
int churn_pre(struct kprobe *p, struct pt_regs *regs);
void churn_post(struct kprobe *p, struct pt_regs *regs, unsigned long flags);
int churn_rp_entry(struct kretprobe_instance *ri, struct pt_regs *regs);
int churn_rp_ret(struct kretprobe_instance *ri, struct pt_regs *regs);
long churn_jp_chjp(long a, long b, long c);
double churn_jp_fdot(double a, double b, double c, double d);
extern struct sprobe *steady_jprobe;
extern struct cprobe *churn_jprobe_chjp, *churn_jprobe_fdot;
void check_regs(int site, const struct pt_regs *regs);
void site_symbol(int site, char *buf, size_t len);

/* Writes every argument vector register and errno (soak_targets.c): the
 * detours must save and restore them around such a handler. */
void clobber_vector_and_errno(void);

#endif
