/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Fibers. On x86-64 a switch is a few instructions of our own (below):
 * swapcontext() also saves and restores the signal mask, two system calls
 * per switch, and an operation switches a dozen times. Elsewhere it is
 * ucontext. Stacks are mmap()ed with a guard page below, so an
 * overflow faults instead of writing over a neighbour, and pages are only
 * committed as they are touched: a thousand parked fibers cost what their
 * stacks really use. The sanitizers are told of every switch; without
 * that, ASan takes a fiber's stack for a wild pointer and TSan loses track
 * of which stack it is on.
 */
#define _GNU_SOURCE
#include "core/fiber.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "core/error.h"

#if defined(__SANITIZE_ADDRESS__)
#define REDLOCK_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define REDLOCK_FIBER_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define REDLOCK_FIBER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define REDLOCK_FIBER_TSAN 1
#endif
#endif

#ifdef REDLOCK_FIBER_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef REDLOCK_FIBER_TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* The lock core's deepest path (a TLS handshake inside a fan-out, a
 * formatted log line) stays well under 64 KiB; the sanitizers' redzones
 * need several times as much. */
#if defined(REDLOCK_FIBER_ASAN) || defined(REDLOCK_FIBER_TSAN)
#define STACK_BYTES (1024 * 1024)
#else
#define STACK_BYTES (256 * 1024)
#endif
/* Stacks kept for reuse per thread: mmap and munmap are system calls. */
#define STACKS_KEPT 64

#if defined(__x86_64__)
/*
 * Saves the callee-saved registers, the SSE and x87 control words and the
 * stack pointer in *save_sp, then resumes the context saved at load_sp
 * (System V ABI: everything else is the caller's to save).
 */
void redlock__ctx_switch(void **save_sp, void *load_sp);
__asm__(".text\n"
        ".globl redlock__ctx_switch\n"
        ".hidden redlock__ctx_switch\n"
        ".type redlock__ctx_switch,@function\n"
        "redlock__ctx_switch:\n"
        "    pushq %rbp\n"
        "    pushq %rbx\n"
        "    pushq %r12\n"
        "    pushq %r13\n"
        "    pushq %r14\n"
        "    pushq %r15\n"
        "    subq $8, %rsp\n"
        "    stmxcsr (%rsp)\n"
        "    fnstcw 4(%rsp)\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    ldmxcsr (%rsp)\n"
        "    fldcw 4(%rsp)\n"
        "    addq $8, %rsp\n"
        "    popq %r15\n"
        "    popq %r14\n"
        "    popq %r13\n"
        "    popq %r12\n"
        "    popq %rbx\n"
        "    popq %rbp\n"
        "    ret\n"
        ".size redlock__ctx_switch,.-redlock__ctx_switch\n");

typedef struct context {
    void *sp;
} context;
#else
typedef ucontext_t context;
#endif

struct redlock__fiber {
    context ctx, caller;
    redlock__fiber_fn fn;
    void *arg;
    char *map;     /* guard page + stack */
    size_t map_len;
    int started, done;
    redlock__park park;
#ifdef REDLOCK_FIBER_ASAN
    void *fake_stack;
    const void *caller_bottom;
    size_t caller_size;
#endif
#ifdef REDLOCK_FIBER_TSAN
    void *tsan, *caller_tsan;
#endif
};

static _Thread_local redlock__fiber *current;
static _Thread_local char *kept[STACKS_KEPT];
static _Thread_local size_t n_kept;
static _Thread_local size_t n_live; /* fibers of this thread not freed */

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);

    return p > 0 ? (size_t)p : 4096;
}

static char *stack_get(size_t *len)
{
    char *m;

    *len = STACK_BYTES + page_size();
    if (n_kept > 0) {
        m = kept[--n_kept];
#ifdef REDLOCK_FIBER_ASAN
        /* The last fiber's frames may have left redzones behind. */
        __asan_unpoison_memory_region(m + page_size(), STACK_BYTES);
#endif
        return m;
    }
    m = mmap(NULL, *len, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    if (mprotect(m, page_size(), PROT_NONE) != 0) {
        munmap(m, *len);
        return NULL;
    }
#ifdef REDLOCK_FIBER_ASAN
    /* The address may have held another fiber's stack, whose frames'
     * redzones the shadow still remembers after munmap. */
    __asan_unpoison_memory_region(m + page_size(), STACK_BYTES);
#endif
    return m;
}

static void stack_put(char *m, size_t len)
{
    if (n_kept < STACKS_KEPT)
        kept[n_kept++] = m;
    else
        munmap(m, len);
}

/* Switch bookkeeping for the sanitizers: into a fiber, and back out. */
static void enter_begin(redlock__fiber *f, void **save)
{
#ifdef REDLOCK_FIBER_ASAN
    __sanitizer_start_switch_fiber(save, f->map + page_size(), STACK_BYTES);
#else
    (void)save;
#endif
#ifdef REDLOCK_FIBER_TSAN
    f->caller_tsan = __tsan_get_current_fiber();
    __tsan_switch_to_fiber(f->tsan, 0);
#else
    (void)f;
#endif
}

static void enter_end(void *save)
{
#ifdef REDLOCK_FIBER_ASAN
    __sanitizer_finish_switch_fiber(save, NULL, NULL);
#else
    (void)save;
#endif
}

static void leave_begin(redlock__fiber *f)
{
#ifdef REDLOCK_FIBER_ASAN
    __sanitizer_start_switch_fiber(&f->fake_stack, f->caller_bottom, f->caller_size);
#endif
#ifdef REDLOCK_FIBER_TSAN
    __tsan_switch_to_fiber(f->caller_tsan, 0);
#else
    (void)f;
#endif
}

static void leave_end(redlock__fiber *f, int first)
{
#ifdef REDLOCK_FIBER_ASAN
    __sanitizer_finish_switch_fiber(first ? NULL : f->fake_stack, &f->caller_bottom,
                                    &f->caller_size);
#else
    (void)f, (void)first;
#endif
}

static _Thread_local redlock__fiber *starting;

static void context_switch(context *save, context *load);

/* A fiber's whole life: each run of fn, then back to the resumer, where
 * redlock__fiber_reset() may set the next fn. It never returns: a fiber
 * reused from the start would leave a frame behind per run (TSan counts
 * them in a stack of fixed size). */
static void entry(void)
{
    redlock__fiber *f = starting;

    leave_end(f, 1);
    for (;;) {
        f->fn(f->arg);
        f->done = 1;
        current = NULL;
        leave_begin(f);
        context_switch(&f->ctx, &f->caller);
        leave_end(f, 0);
    }
}

/* The new fiber's first switch lands in entry() with a stack aligned as
 * after a call. */
static int context_make(redlock__fiber *f)
{
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)(f->map + page_size()) + STACK_BYTES) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 16);
    uint32_t csr[2];
    size_t i;

    sp[0] = (uint64_t)(uintptr_t)entry; /* what the switch returns to */
    sp[1] = 0;
    for (i = 1; i <= 6; i++)
        sp[-(long)i] = 0;                 /* rbp rbx r12 r13 r14 r15 */
    __asm__ volatile("stmxcsr %0" : "=m"(csr[0]));
    __asm__ volatile("fnstcw %0" : "=m"(csr[1]));
    memcpy(&sp[-7], csr, sizeof(csr));
    f->ctx.sp = &sp[-7];
    return 0;
#else
    if (getcontext(&f->ctx) != 0)
        return -1;
    f->ctx.uc_stack.ss_sp = f->map + page_size();
    f->ctx.uc_stack.ss_size = STACK_BYTES;
    f->ctx.uc_link = NULL;
    makecontext(&f->ctx, entry, 0);
    return 0;
#endif
}

static void context_switch(context *save, context *load)
{
#if defined(__x86_64__)
    redlock__ctx_switch(&save->sp, load->sp);
#else
    swapcontext(save, load);
#endif
}

int redlock__fiber_new(redlock__fiber **out, redlock__fiber_fn fn, void *arg)
{
    redlock__fiber *f = calloc(1, sizeof(*f));

    *out = NULL;
    if (!f)
        return redlock__fail(REDLOCK_ENOMEM, "out of memory");
    f->map = stack_get(&f->map_len);
    if (!f->map || context_make(f) != 0) {
        if (f->map)
            stack_put(f->map, f->map_len);
        free(f);
        return redlock__fail(REDLOCK_ENOMEM, "cannot allocate a fiber stack");
    }
    f->fn = fn;
    f->arg = arg;
    f->park.deadline_ns = INT64_MAX;
#ifdef REDLOCK_FIBER_TSAN
    f->tsan = __tsan_create_fiber(0);
#endif
    n_live++;
    *out = f;
    return REDLOCK_OK;
}

void redlock__fiber_reset(redlock__fiber *f, redlock__fiber_fn fn, void *arg)
{
    /* A fiber that never ran starts in entry() anyway; one that ran waits
     * in entry()'s loop for its next fn. */
    f->fn = fn;
    f->arg = arg;
    f->done = 0;
    memset(&f->park, 0, sizeof(f->park));
    f->park.deadline_ns = INT64_MAX;
}

int redlock__fiber_resume(redlock__fiber *f)
{
    void *save = NULL;

    if (f->done)
        return 1;
    if (!f->started) {
        f->started = 1;
        starting = f;
    }
    current = f;
    enter_begin(f, &save);
    context_switch(&f->caller, &f->ctx);
    enter_end(save);
    current = NULL;
    return f->done;
}

void redlock__fiber_yield(void)
{
    redlock__fiber *f = current;

    if (!f)
        return;
    current = NULL;
    leave_begin(f);
    context_switch(&f->ctx, &f->caller);
    leave_end(f, 0);
    current = f;
}

redlock__fiber *redlock__fiber_current(void)
{
    return current;
}

redlock__park *redlock__fiber_park(redlock__fiber *f)
{
    return &f->park;
}

void redlock__fiber_free(redlock__fiber *f)
{
    if (!f)
        return;
#ifdef REDLOCK_FIBER_TSAN
    __tsan_destroy_fiber(f->tsan);
#endif
    stack_put(f->map, f->map_len);
    free(f);
    /* The thread's last fiber gone (its loop freed): the kept stacks go
     * too, or a thread that ran a loop once would keep them to its end. */
    if (--n_live == 0)
        while (n_kept > 0)
            munmap(kept[--n_kept], STACK_BYTES + page_size());
}
