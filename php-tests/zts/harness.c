/*
 * The ZTS harness of scripts/zts: a thread-safe PHP (the embed SAPI) driven the way FrankenPHP
 * drives it, with real threads, to show that ratelimit ends every lease with its logical
 * request and writes every thread's counts when the thread ends.
 *
 *   harness SO WORK_DIR SCRIPTS_DIR
 *
 * One PHP (module startup on the main thread, as FrankenPHP's php_main), then three phases of
 * threads, each starting as FrankenPHP's php_thread does (ts_resource(0): PHP re-applies every
 * php.ini directive for the new thread). Within a phase, thread i+1 starts only once thread i
 * holds the lease of its first request, which it keeps until every thread of the phase has
 * started (harness_hold_until_all_started()): so each thread holds a lease while later ones
 * apply php.ini again.
 *
 *   1. classic: CLASSIC_THREADS threads x CLASSIC_REQUESTS requests, each a whole PHP request
 *      (php_request_startup, classic.php, php_request_shutdown), then ts_free_thread();
 *   2. worker: WORKER_THREADS threads each running worker.php in one PHP request, which serves
 *      WORKER_REQUESTS logical requests through harness_handle_request() (FrankenPHP's
 *      frankenphp_handle_request: sapi_activate(), the callback, sapi_deactivate(), and no
 *      request shutdown in between), then ts_free_thread();
 *   then check.php on the main thread: the totals every thread wrote, exact;
 *   3. unfreed: UNFREED_THREADS threads run classic.php once and exit WITHOUT ts_free_thread()
 *      (a server that never frees its threads): their counts are written at module shutdown,
 *      on the main thread, which scripts/zts checks afterwards with the CLI (final.php).
 *
 * The PHP scripts report failures with harness_fail(); the exit status is 1 if any was reported
 * or any step of PHP's lifecycle failed, else 0.
 */
#include <main/php.h>
#include <main/SAPI.h>
#include <main/php_main.h>
#include <main/php_output.h>
#include <sapi/embed/php_embed.h>
#include <Zend/zend_exceptions.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CLASSIC_THREADS 8
#define CLASSIC_REQUESTS 25
#define WORKER_THREADS 4
#define WORKER_REQUESTS 100
#define UNFREED_THREADS 2
#define STR(x) #x
#define XSTR(x) STR(x)

static char scripts_dir[4096];
static atomic_int failures;

/* Threads of the current phase that have started (done ts_resource), and that hold their
 * first lease, for harness_hold_until_all_started(). */
static pthread_mutex_t phase_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t phase_cond = PTHREAD_COND_INITIALIZER;
static int phase_started, phase_holding, phase_threads;

/* What the running thread is doing, for the scripts. */
static __thread long thread_number = -1, request_number = -1;
static __thread const char *thread_phase = "main";
/* Worker mode: logical requests served, and whether the dummy request was ended. */
static __thread long served;
static __thread int worker_ready;

static void fail(const char *what)
{
	atomic_fetch_add(&failures, 1);
	fprintf(stderr, "harness: FAILED: %s thread %ld request %ld: %s\n", thread_phase, thread_number,
		request_number, what);
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_harness_fail, 0, 1, IS_VOID, 0)
	ZEND_ARG_TYPE_INFO(0, why, IS_STRING, 0)
ZEND_END_ARG_INFO()

/* harness_fail(string $why): records a failed expectation of a script. */
PHP_FUNCTION(harness_fail)
{
	zend_string *why;
	ZEND_PARSE_PARAMETERS_START(1, 1)
		Z_PARAM_STR(why)
	ZEND_PARSE_PARAMETERS_END();
	fail(ZSTR_VAL(why));
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_harness_where, 0, 0, IS_ARRAY, 0)
ZEND_END_ARG_INFO()

/* harness_where(): ['phase' => ..., 'thread' => ..., 'request' => ...] of the running thread. */
PHP_FUNCTION(harness_where)
{
	ZEND_PARSE_PARAMETERS_NONE();
	array_init(return_value);
	add_assoc_string(return_value, "phase", (char *)thread_phase);
	add_assoc_long(return_value, "thread", thread_number);
	add_assoc_long(return_value, "request", request_number);
}

/* harness_plan(): the numbers of threads and requests of each phase. */
PHP_FUNCTION(harness_plan)
{
	ZEND_PARSE_PARAMETERS_NONE();
	array_init(return_value);
	add_assoc_long(return_value, "classic_threads", CLASSIC_THREADS);
	add_assoc_long(return_value, "classic_requests", CLASSIC_REQUESTS);
	add_assoc_long(return_value, "worker_threads", WORKER_THREADS);
	add_assoc_long(return_value, "worker_requests", WORKER_REQUESTS);
	add_assoc_long(return_value, "unfreed_threads", UNFREED_THREADS);
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_harness_void, 0, 0, IS_VOID, 0)
ZEND_END_ARG_INFO()

/* Waits (60 s at most) until COUNT reaches WANT; false on timeout. Called with phase_lock. */
static int wait_for(int *count, int want)
{
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 60;
	while (*count < want) {
		if (pthread_cond_timedwait(&phase_cond, &phase_lock, &deadline) == ETIMEDOUT) {
			return 0;
		}
	}
	return 1;
}

/* harness_hold_until_all_started(): called by each thread's first request while it holds a
 * lease. The next thread of the phase is only started then (see run_phase), and this returns
 * once every thread of the phase has started: the caller, mid-request, has seen each later
 * thread apply php.ini again, and makes its next call after that. */
PHP_FUNCTION(harness_hold_until_all_started)
{
	ZEND_PARSE_PARAMETERS_NONE();
	pthread_mutex_lock(&phase_lock);
	phase_holding++;
	pthread_cond_broadcast(&phase_cond);
	if (!wait_for(&phase_started, phase_threads)) {
		fail("the other threads did not start within 60 s");
	}
	pthread_mutex_unlock(&phase_lock);
}

/* FrankenPHP's frankenphp_worker_request_startup(), reduced to what a request needs here. */
static int worker_request_startup(void)
{
	volatile int rc = SUCCESS;
	zend_try {
		php_output_activate();
		PG(header_is_being_sent) = 0;
		PG(connection_status) = PHP_CONNECTION_NORMAL;
		sapi_activate();
	} zend_catch {
		rc = FAILURE;
	} zend_end_try();
	SG(headers_sent) = 1;
	SG(request_info).no_headers = 1;
	SG(sapi_started) = 1;
	return rc;
}

/* FrankenPHP's frankenphp_worker_request_shutdown(): the end of one logical request. */
static void worker_request_shutdown(void)
{
	zend_try {
		php_output_end_all();
	} zend_end_try();
	zend_try {
		php_output_deactivate();
	} zend_end_try();
	zend_try {
		sapi_deactivate();
	} zend_end_try();
	zend_set_memory_limit(PG(memory_limit));
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_harness_handle_request, 0, 1, _IS_BOOL, 0)
	ZEND_ARG_TYPE_INFO(0, callback, IS_CALLABLE, 0)
ZEND_END_ARG_INFO()

/* harness_handle_request(callable $callback): bool, as frankenphp_handle_request(): ends the
 * dummy request that started the worker script (first call only), then runs one logical
 * request around the callback; false (after starting one more, as FrankenPHP does) once
 * WORKER_REQUESTS were served. */
PHP_FUNCTION(harness_handle_request)
{
	zend_fcall_info fci;
	zend_fcall_info_cache fcc;
	ZEND_PARSE_PARAMETERS_START(1, 1)
		Z_PARAM_FUNC(fci, fcc)
	ZEND_PARSE_PARAMETERS_END();

	if (!worker_ready) {
		worker_request_shutdown();
		worker_ready = 1;
	}
	int more = served < WORKER_REQUESTS;
	if (worker_request_startup() == FAILURE || !more) {
		RETURN_FALSE;
	}
	request_number = served;
	zval retval;
	ZVAL_UNDEF(&retval);
	fci.retval = &retval;
	fci.param_count = 0;
	if (zend_call_function(&fci, &fcc) == SUCCESS) {
		zval_ptr_dtor(&retval);
	}
	if (EG(exception)) {
		fail("the callback threw");
		zend_exception_error(EG(exception), E_ERROR);
	}
	worker_request_shutdown();
	served++;
	RETURN_TRUE;
}

static const zend_function_entry harness_functions[] = {
	ZEND_FE(harness_fail, arginfo_harness_fail)
	ZEND_FE(harness_where, arginfo_harness_where)
	ZEND_FE(harness_plan, arginfo_harness_where)
	ZEND_FE(harness_hold_until_all_started, arginfo_harness_void)
	ZEND_FE(harness_handle_request, arginfo_harness_handle_request)
	ZEND_FE_END
};

/* One PHP request running SCRIPT (a file of scripts_dir). */
static void run_request(const char *script)
{
	char path[4200];
	snprintf(path, sizeof path, "%s/%s", scripts_dir, script);
	if (php_request_startup() == FAILURE) {
		fail("php_request_startup failed");
		return;
	}
	SG(headers_sent) = 1;
	SG(request_info).no_headers = 1;
	zend_file_handle file;
	zend_stream_init_filename(&file, path);
	zend_try {
		if (!php_execute_script(&file)) {
			fail("php_execute_script failed");
		}
	} zend_end_try();
	zend_destroy_file_handle(&file);
	if (EG(exit_status) != 0) {
		fail("the script ended with a non-zero exit status");
	}
	php_request_shutdown(NULL);
}

struct job {
	const char *phase, *script;
	long number, requests;
	int free_thread;
};

static void *thread_main(void *arg)
{
	struct job *job = arg;
	thread_phase = job->phase;
	thread_number = job->number;
	/* As FrankenPHP's php_thread: this thread's globals; PHP applies php.ini again here. */
	(void)ts_resource(0);
	pthread_mutex_lock(&phase_lock);
	phase_started++;
	pthread_cond_broadcast(&phase_cond);
	pthread_mutex_unlock(&phase_lock);
	for (long r = 0; r < job->requests; r++) {
		request_number = r;
		run_request(job->script);
	}
	if (job->free_thread) {
		/* GSHUTDOWN of every module runs here, on this thread. */
		ts_free_thread();
	}
	return NULL;
}

static int run_phase(const char *phase, const char *script, int threads, long requests, int free_thread,
	const char *what)
{
	pthread_t tid[16];
	struct job jobs[16];
	int created = 0, rc = 0;
	phase_started = phase_holding = 0;
	phase_threads = threads;
	for (int i = 0; i < threads; i++) {
		jobs[i] = (struct job){phase, script, i, requests, free_thread};
		if (pthread_create(&tid[i], NULL, thread_main, &jobs[i]) != 0) {
			fprintf(stderr, "harness: pthread_create failed\n");
			rc = -1;
			break;
		}
		created++;
		/* The next thread starts only while this one holds its first lease. */
		pthread_mutex_lock(&phase_lock);
		int holding = wait_for(&phase_holding, i + 1);
		pthread_mutex_unlock(&phase_lock);
		if (!holding) {
			fail("a thread did not reach its first lease within 60 s");
			rc = -1;
			break;
		}
	}
	for (int i = 0; i < created; i++) {
		pthread_join(tid[i], NULL);
	}
	if (rc != 0) {
		return rc;
	}
	printf("harness: phase %s done: %d threads, %s\n", phase, threads, what);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: harness SO WORK_DIR SCRIPTS_DIR\n");
		return 2;
	}
	snprintf(scripts_dir, sizeof scripts_dir, "%s", argv[3]);
	char *ini = malloc(8192);
	snprintf(ini, 8192,
		"extension=%s\n"
		"ratelimit.db_path=%s/db.sqlite\n"
		/* The test is about lifecycles, not contention: never "unavailable" on a loaded machine. */
		"ratelimit.busy_timeout_ms=10000\n"
		"error_log=%s/php-errors.log\n"
		"log_errors=1\n"
		"display_errors=stderr\n"
		"html_errors=0\n"
		"implicit_flush=1\n"
		"output_buffering=0\n"
		"max_execution_time=0\n",
		argv[1], argv[2], argv[2]);

	/* As FrankenPHP's php_main: TSRM, the SAPI, then module startup on this (main) thread. */
	php_tsrm_startup();
	zend_signal_startup();
	sapi_startup(&php_embed_module);
	php_embed_module.ini_entries = ini;
	php_embed_module.php_ini_ignore = 1;
	php_embed_module.additional_functions = harness_functions;
	if (php_embed_module.startup(&php_embed_module) == FAILURE) {
		fprintf(stderr, "harness: module startup failed\n");
		return 1;
	}
	SG(options) |= SAPI_OPTION_NO_CHDIR;

	int rc = 0;
	rc |= run_phase("classic", "classic.php", CLASSIC_THREADS, CLASSIC_REQUESTS, 1,
		XSTR(CLASSIC_REQUESTS) " PHP requests each, then ts_free_thread()");
	rc |= run_phase("worker", "worker.php", WORKER_THREADS, 1, 1,
		"one PHP request each serving " XSTR(WORKER_REQUESTS) " logical requests, then ts_free_thread()");
	thread_phase = "check";
	thread_number = -1;
	request_number = 0;
	run_request("check.php");
	rc |= run_phase("unfreed", "classic.php", UNFREED_THREADS, 1, 0,
		"one PHP request each, never freed (their globals end at module shutdown)");

	/* As FrankenPHP at its end: module shutdown (GSHUTDOWN for every thread not freed), then
	 * the SAPI and TSRM. */
	php_embed_module.shutdown(&php_embed_module);
	sapi_shutdown();
	tsrm_shutdown();
	free(ini);

	int failed = atomic_load(&failures);
	printf("harness: %d failed expectations\n", failed);
	return (rc != 0 || failed != 0) ? 1 : 0;
}
