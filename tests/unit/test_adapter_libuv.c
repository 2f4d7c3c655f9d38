/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libuv adapter (<redlock/adapters/libuv.h>) on a real libuv loop, with
 * the two library calls it makes replaced by this file's stand-ins, so the
 * test sees exactly what the adapter does with the fds it is given. No
 * server needed.
 *
 * A descriptor the library stopped watching and then closed gets a new
 * owner in the program. Detaching the adapter afterwards must not touch
 * that number: libuv's uv_close() of a poll handle removes its fd number
 * from epoll, and a handle kept for a closed fd would remove the program's
 * registration, so the program's socket never reports again.
 */
#define _GNU_SOURCE
#include <check.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "redlock/adapters/libuv.h"

static redlock_socket_fn socket_hook;
static void *hook_ud;

int redlock_loop_attach(redlock_client *client, redlock_socket_fn socket_fn,
                        redlock_timer_fn timer_fn, void *userdata)
{
    (void)client;
    (void)timer_fn;
    socket_hook = socket_fn;
    hook_ud = userdata;
    return REDLOCK_OK;
}

int redlock_loop_action(redlock_client *client, int fd, int events)
{
    (void)client;
    (void)fd;
    (void)events;
    return REDLOCK_OK;
}

static int program_reads;

static void on_program_readable(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    program_reads++;
    uv_poll_stop(h);
}

static void stop_loop(uv_timer_t *t)
{
    uv_stop(t->loop);
}

START_TEST(test_detach_leaves_reused_fd_alone)
{
    uv_loop_t loop;
    uv_poll_t program;
    uv_timer_t timer;
    redlock_libuv *ad;
    int lib[2], prog[2];

    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(redlock_libuv_attach((redlock_client *)&loop, &loop, &ad), REDLOCK_OK);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, lib), 0);
    /* The library watches a connection, then stops before closing it. */
    socket_hook(hook_ud, lib[0], REDLOCK_EV_READ);
    uv_run(&loop, UV_RUN_NOWAIT);
    socket_hook(hook_ud, lib[0], 0);
    close(lib[0]);
    close(lib[1]);
    /* The program's socket gets the same number. */
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, prog), 0);
    ck_assert_int_eq(prog[0], lib[0]);
    ck_assert_int_eq(uv_poll_init(&loop, &program, prog[0]), 0);
    ck_assert_int_eq(uv_poll_start(&program, UV_READABLE, on_program_readable), 0);
    uv_run(&loop, UV_RUN_NOWAIT);
    redlock_libuv_detach(ad);
    ck_assert_int_eq(write(prog[1], "x", 1), 1);
    ck_assert_int_eq(uv_timer_init(&loop, &timer), 0);
    ck_assert_int_eq(uv_timer_start(&timer, stop_loop, 300, 0), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_msg(program_reads == 1,
                  "the program's socket on the library's old fd number reported %d times "
                  "after detach (1 expected)", program_reads);
    uv_close((uv_handle_t *)&program, NULL);
    uv_close((uv_handle_t *)&timer, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    close(prog[0]);
    close(prog[1]);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("adapter_libuv");
    TCase *tc = tcase_create("libuv");
    SRunner *sr;
    int failed;

    tcase_add_test(tc, test_detach_leaves_reused_fd_alone);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
