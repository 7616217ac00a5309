/* test_pipeline_schedule.c — graph/pipeline.c's schedules run by a
 * discrete-event simulator of p stages exchanging blocking messages.
 *
 * The model: every stage starts at time 0 and runs its action list in order.
 * FORWARD costs F, BACKWARD costs B (the sweeps use F = B = 1 and F = 1,
 * B = 2), messages cost nothing. Messages are rendezvous, the strict model: a
 * send completes only when the matching receive is posted and a receive only
 * when the matching send is, both at the later of the two posting times; a
 * SENDRECV's two halves each complete that way, on their own, and the action
 * ends when both have. A sweep in which no stage can progress before all are
 * done is a deadlock. Schedules that pass here therefore also pass with
 * buffered sends.
 *
 * Checked for p in 1..8, m in 1..32, both kinds: completion; each
 * micro-batch's forward once per stage, on stages 0..p-1 in time order, its
 * backward once per stage on p-1..0, after its forward there; each message
 * once, received before the compute that needs it and sent after the one that
 * makes it; the makespan (F + B)(m + p - 1) and so the idle fraction
 * (p - 1)/(m + p - 1), the same for both kinds; the peak of activations held
 * (1f1b: min(p - s, m) <= p - s; gpipe: m); both ends of every link listing
 * the same exchanges (pipeline.h's rule). Then broken schedules (a SENDRECV
 * split into a send and a receive, actions swapped or dropped) must fail. */
#include "../graph/pipeline.h"

#include "gr_test.h"

#define SIM_MAX_P 8
#define SIM_MAX_M 32
#define SIM_MAX_ACT 512

/* A schedule the simulator runs: a mutable copy of each stage's list. */
typedef struct sim_sched {
    int p, m;
    gr_pipe_action a[SIM_MAX_P][SIM_MAX_ACT];
    int n[SIM_MAX_P];
} sim_sched;

/* One message of an action: sent or received, activation or grad, which
 * micro-batch, and whether it has completed (at time t). */
typedef struct sim_half {
    bool send, grad;
    int mb;
    bool done;
    long t;
} sim_half;

/* What a run observed, per stage and micro-batch: compute times (-1: never
 * ran), how often, at which action index; the same for each message. */
typedef struct sim_obs {
    long f_start[SIM_MAX_P][SIM_MAX_M], f_end[SIM_MAX_P][SIM_MAX_M];
    long b_start[SIM_MAX_P][SIM_MAX_M], b_end[SIM_MAX_P][SIM_MAX_M];
    int f_pos[SIM_MAX_P][SIM_MAX_M], b_pos[SIM_MAX_P][SIM_MAX_M];
    int f_count[SIM_MAX_P][SIM_MAX_M], b_count[SIM_MAX_P][SIM_MAX_M];
    int msg_pos[SIM_MAX_P][4][SIM_MAX_M];   /* [stage][send_act, recv_act, send_grad, recv_grad][mb] */
    int msg_count[SIM_MAX_P][4][SIM_MAX_M];
    long end[SIM_MAX_P], makespan;
} sim_obs;

enum { MSG_SEND_ACT, MSG_RECV_ACT, MSG_SEND_GRAD, MSG_RECV_GRAD };

static void sim_load(sim_sched *ss, const gr_pipe_schedule *sc) {
    ss->p = sc->p;
    ss->m = sc->m;
    for (int s = 0; s < sc->p; s++) {
        const gr_pipe_action *a = gr_pipe_stage(sc, s, &ss->n[s]);
        GR_ASSERT(ss->n[s] <= SIM_MAX_ACT);
        memcpy(ss->a[s], a, (size_t)ss->n[s] * sizeof *a);
    }
}

/* The messages of action a into h; returns how many (0 for compute). */
static int sim_halves(const gr_pipe_action *a, sim_half h[2]) {
    memset(h, 0, 2 * sizeof *h);
    switch (a->op) {
    case GR_PIPE_SEND_ACT: h[0] = (sim_half){true, false, a->mb, false, 0}; return 1;
    case GR_PIPE_RECV_ACT: h[0] = (sim_half){false, false, a->mb, false, 0}; return 1;
    case GR_PIPE_SEND_GRAD: h[0] = (sim_half){true, true, a->mb, false, 0}; return 1;
    case GR_PIPE_RECV_GRAD: h[0] = (sim_half){false, true, a->mb, false, 0}; return 1;
    case GR_PIPE_SEND_ACT_RECV_GRAD:
        h[0] = (sim_half){true, false, a->mb, false, 0};
        h[1] = (sim_half){false, true, a->recv_mb, false, 0};
        return 2;
    case GR_PIPE_SEND_GRAD_RECV_ACT:
        h[0] = (sim_half){true, true, a->mb, false, 0};
        h[1] = (sim_half){false, false, a->recv_mb, false, 0};
        return 2;
    default: return 0;
    }
}

/* The simulator's state: each stage's next action, its clock (the time it
 * reached that action) and, for a message action, its halves' progress. */
typedef struct sim_state {
    int pc[SIM_MAX_P];
    long t[SIM_MAX_P];
    sim_half h[SIM_MAX_P][2];
    int nh[SIM_MAX_P];
    bool loaded[SIM_MAX_P];
} sim_state;

static void sim_record_msg(sim_obs *o, int s, int pos, const sim_half *h) {
    int k = h->grad ? (h->send ? MSG_SEND_GRAD : MSG_RECV_GRAD) : (h->send ? MSG_SEND_ACT : MSG_RECV_ACT);
    if (h->mb < 0 || h->mb >= SIM_MAX_M) return;
    o->msg_pos[s][k][h->mb] = pos;
    o->msg_count[s][k][h->mb]++;
}

/* Completes the halves of stage s's current message action that stage q's
 * current action matches; returns whether any did. */
static bool sim_match(const sim_sched *ss, sim_state *st, int s) {
    const gr_pipe_action *a = &ss->a[s][st->pc[s]];
    int q = a->peer;
    if (q < 0 || q >= ss->p || st->pc[q] >= ss->n[q] || !st->loaded[q]) return false;
    if (ss->a[q][st->pc[q]].peer != s) return false;
    bool any = false;
    for (int i = 0; i < st->nh[s]; i++)
        for (int j = 0; j < st->nh[q]; j++) {
            sim_half *x = &st->h[s][i], *y = &st->h[q][j];
            if (x->done || y->done || x->send == y->send || x->grad != y->grad || x->mb != y->mb) continue;
            x->done = y->done = true;
            x->t = y->t = st->t[s] > st->t[q] ? st->t[s] : st->t[q];
            any = true;
        }
    return any;
}

/* Runs stage s as far as it can; returns whether it advanced. */
static bool sim_step(const sim_sched *ss, sim_state *st, sim_obs *o, int s, long cf, long cb) {
    bool moved = false;
    while (st->pc[s] < ss->n[s]) {
        int pos = st->pc[s];
        const gr_pipe_action *a = &ss->a[s][pos];
        if (a->op == GR_PIPE_FORWARD || a->op == GR_PIPE_BACKWARD) {
            bool f = a->op == GR_PIPE_FORWARD;
            if (a->mb >= 0 && a->mb < SIM_MAX_M) {
                (f ? o->f_start : o->b_start)[s][a->mb] = st->t[s];
                (f ? o->f_end : o->b_end)[s][a->mb] = st->t[s] + (f ? cf : cb);
                (f ? o->f_pos : o->b_pos)[s][a->mb] = pos;
                (f ? o->f_count : o->b_count)[s][a->mb]++;
            }
            st->t[s] += f ? cf : cb;
            st->pc[s]++;
            moved = true;
            continue;
        }
        if (!st->loaded[s]) {
            st->nh[s] = sim_halves(a, st->h[s]);
            st->loaded[s] = true;
        }
        moved |= sim_match(ss, st, s);
        bool all = true;
        for (int i = 0; i < st->nh[s]; i++) all &= st->h[s][i].done;
        if (!all) break;
        for (int i = 0; i < st->nh[s]; i++) {
            if (st->h[s][i].t > st->t[s]) st->t[s] = st->h[s][i].t;
            sim_record_msg(o, s, pos, &st->h[s][i]);
        }
        st->loaded[s] = false;
        st->pc[s]++;
        moved = true;
    }
    return moved;
}

/* Runs ss with forward cost cf and backward cost cb into o; returns false
 * with why on a deadlock. */
static bool sim_run(const sim_sched *ss, long cf, long cb, sim_obs *o, char *why, size_t cap) {
    static sim_state st;
    memset(&st, 0, sizeof st);
    memset(o, 0, sizeof *o);
    for (;;) {
        bool moved = false, finished = true;
        for (int s = 0; s < ss->p; s++) moved |= sim_step(ss, &st, o, s, cf, cb);
        for (int s = 0; s < ss->p; s++) finished &= st.pc[s] == ss->n[s];
        if (finished) break;
        if (moved) continue;
        int len = snprintf(why, cap, "deadlock:");
        for (int s = 0; s < ss->p && len < (int)cap; s++) {
            const gr_pipe_action *a = st.pc[s] < ss->n[s] ? &ss->a[s][st.pc[s]] : NULL;
            len += snprintf(why + len, cap - (size_t)len, " stage %d at %s(%d)", s,
                            a ? gr_pipe_op_name(a->op) : "end", a ? a->mb : -1);
        }
        return false;
    }
    o->makespan = 0;
    for (int s = 0; s < ss->p; s++) {
        o->end[s] = st.t[s];
        if (st.t[s] > o->makespan) o->makespan = st.t[s];
    }
    return true;
}

#define FAIL(...) do { snprintf(why, cap, __VA_ARGS__); return false; } while (0)

/* Each forward and backward once per stage, in pipeline order in time. */
static bool sim_check_compute(const sim_sched *ss, const sim_obs *o, char *why, size_t cap) {
    int p = ss->p;
    for (int s = 0; s < p; s++)
        for (int mb = 0; mb < ss->m; mb++) {
            if (o->f_count[s][mb] != 1 || o->b_count[s][mb] != 1)
                FAIL("stage %d: micro-batch %d ran %d forwards, %d backwards", s, mb, o->f_count[s][mb],
                     o->b_count[s][mb]);
            if (s > 0 && o->f_start[s][mb] < o->f_end[s - 1][mb])
                FAIL("stage %d: forward(%d) at %ld before stage %d's ended (%ld)", s, mb, o->f_start[s][mb],
                     s - 1, o->f_end[s - 1][mb]);
            if (s < p - 1 && o->b_start[s][mb] < o->b_end[s + 1][mb])
                FAIL("stage %d: backward(%d) at %ld before stage %d's ended (%ld)", s, mb, o->b_start[s][mb],
                     s + 1, o->b_end[s + 1][mb]);
            if (o->b_start[s][mb] < o->f_end[s][mb] || o->b_pos[s][mb] < o->f_pos[s][mb])
                FAIL("stage %d: backward(%d) before its forward", s, mb);
        }
    return true;
}

/* Each message once where a neighbour exists (none where it does not),
 * received before the compute that reads it, sent after the one that
 * writes it. */
static bool sim_check_messages(const sim_sched *ss, const sim_obs *o, char *why, size_t cap) {
    static const char *const names[4] = {"send_act", "recv_act", "send_grad", "recv_grad"};
    int p = ss->p;
    for (int s = 0; s < p; s++)
        for (int mb = 0; mb < ss->m; mb++) {
            bool want[4] = {s < p - 1, s > 0, s > 0, s < p - 1};
            for (int k = 0; k < 4; k++)
                if (o->msg_count[s][k][mb] != (want[k] ? 1 : 0))
                    FAIL("stage %d: %s(%d) happened %d times", s, names[k], mb, o->msg_count[s][k][mb]);
            if (want[MSG_RECV_ACT] && o->msg_pos[s][MSG_RECV_ACT][mb] >= o->f_pos[s][mb])
                FAIL("stage %d: forward(%d) before its activation arrived", s, mb);
            if (want[MSG_SEND_ACT] && o->msg_pos[s][MSG_SEND_ACT][mb] <= o->f_pos[s][mb])
                FAIL("stage %d: activation(%d) sent before its forward", s, mb);
            if (want[MSG_RECV_GRAD] && o->msg_pos[s][MSG_RECV_GRAD][mb] >= o->b_pos[s][mb])
                FAIL("stage %d: backward(%d) before its grad arrived", s, mb);
            if (want[MSG_SEND_GRAD] && o->msg_pos[s][MSG_SEND_GRAD][mb] <= o->b_pos[s][mb])
                FAIL("stage %d: grad(%d) sent before its backward", s, mb);
        }
    return true;
}

/* The most activations stage s holds: forwards run whose backward has not. */
static int sim_peak(const sim_sched *ss, int s) {
    int held = 0, peak = 0;
    for (int i = 0; i < ss->n[s]; i++) {
        if (ss->a[s][i].op == GR_PIPE_FORWARD && ++held > peak) peak = held;
        if (ss->a[s][i].op == GR_PIPE_BACKWARD) held--;
    }
    return peak;
}

/* Action y of stage s+1 is the mirror of action x of stage s on their link. */
static bool sim_mirror(const gr_pipe_action *x, const gr_pipe_action *y) {
    switch (x->op) {
    case GR_PIPE_SEND_ACT: return y->op == GR_PIPE_RECV_ACT && y->mb == x->mb;
    case GR_PIPE_RECV_GRAD: return y->op == GR_PIPE_SEND_GRAD && y->mb == x->mb;
    case GR_PIPE_SEND_ACT_RECV_GRAD:
        return y->op == GR_PIPE_SEND_GRAD_RECV_ACT && y->mb == x->recv_mb && y->recv_mb == x->mb;
    default: return false;
    }
}

/* pipeline.h's rule: on every link both ends list the same exchanges. */
static bool sim_check_links(const sim_sched *ss, char *why, size_t cap) {
    for (int s = 0; s + 1 < ss->p; s++) {
        int i = 0, j = 0;
        for (;;) {
            while (i < ss->n[s] && ss->a[s][i].peer != s + 1) i++;
            while (j < ss->n[s + 1] && ss->a[s + 1][j].peer != s) j++;
            if (i == ss->n[s] && j == ss->n[s + 1]) break;
            if (i == ss->n[s] || j == ss->n[s + 1] || !sim_mirror(&ss->a[s][i], &ss->a[s + 1][j]))
                FAIL("link %d-%d: stage %d's action %d does not mirror stage %d's action %d", s, s + 1, s, i,
                     s + 1, j);
            i++, j++;
        }
    }
    return true;
}

/* One schedule under costs (cf, cb): everything the header comment lists. */
static bool sim_check(const sim_sched *ss, gr_pipe_kind kind, long cf, long cb, long *makespan, char *why,
                      size_t cap) {
    static sim_obs o;
    int p = ss->p, m = ss->m;
    if (!sim_run(ss, cf, cb, &o, why, cap) || !sim_check_compute(ss, &o, why, cap) ||
        !sim_check_messages(ss, &o, why, cap) || !sim_check_links(ss, why, cap))
        return false;
    *makespan = o.makespan;
    long idle = (long)p * o.makespan - (long)p * m * (cf + cb);
    if (o.makespan != (cf + cb) * (m + p - 1) || idle * (m + p - 1) != (long)(p - 1) * p * o.makespan)
        FAIL("makespan %ld, idle %ld of %ld; expected makespan %ld, idle fraction %d/%d", o.makespan, idle,
             (long)p * o.makespan, (cf + cb) * (m + p - 1), p - 1, m + p - 1);
    double frac = (double)idle / ((double)p * o.makespan);
    if (fabs(frac - gr_pipe_bubble_fraction(p, m)) > 1e-12)
        FAIL("idle fraction %.6f, gr_pipe_bubble_fraction %.6f", frac, gr_pipe_bubble_fraction(p, m));
    for (int s = 0; s < p; s++) {
        int peak = sim_peak(ss, s), want = gr_pipe_peak_activations(kind, p, m, s);
        if (peak != want || (kind == GR_PIPE_1F1B && peak > p - s))
            FAIL("stage %d holds %d activations at most; expected %d", s, peak, want);
    }
    return true;
}

/* Every p in 1..8 and m in 1..32 (m < p and odd m among them), both kinds,
 * F = B = 1 and F = 1, B = 2; 1f1b's makespan equal to gpipe's. */
static void test_sweep(void) {
    static sim_sched ss;
    static const long costs[2][2] = {{1, 1}, {1, 2}};
    char why[512];
    int bad = 0;
    for (int p = 1; p <= SIM_MAX_P; p++)
        for (int m = 1; m <= SIM_MAX_M; m++)
            for (int c = 0; c < 2; c++) {
                long span[GR_PIPE_KIND_COUNT] = {0};
                for (int k = 0; k < GR_PIPE_KIND_COUNT; k++) {
                    gr_pipe_schedule sc;
                    gr_error err = {0};
                    CHECK(gr_pipe_schedule_init(&sc, p, m, (gr_pipe_kind)k, &err) == GR_OK);
                    sim_load(&ss, &sc);
                    gr_pipe_schedule_free(&sc);
                    bool ok = sim_check(&ss, (gr_pipe_kind)k, costs[c][0], costs[c][1], &span[k], why, sizeof why);
                    if (!ok && bad++ < 10)
                        fprintf(stderr, "%s p=%d m=%d F=%ld B=%ld: %s\n", gr_pipe_kind_name((gr_pipe_kind)k), p, m,
                                costs[c][0], costs[c][1], why);
                    CHECK(ok);
                }
                CHECK(span[GR_PIPE_1F1B] == span[GR_PIPE_GPIPE]);
            }
}

/* Replaces every SENDRECV of ss by its send then its receive: the naive
 * blocking order, in which neighbours both send first. */
static void sim_split_sendrecv(sim_sched *ss) {
    for (int s = 0; s < ss->p; s++)
        for (int i = 0; i < ss->n[s]; i++) {
            gr_pipe_action *a = &ss->a[s][i];
            bool up = a->op == GR_PIPE_SEND_ACT_RECV_GRAD;
            if (!up && a->op != GR_PIPE_SEND_GRAD_RECV_ACT) continue;
            GR_ASSERT(ss->n[s] < SIM_MAX_ACT);
            memmove(a + 2, a + 1, (size_t)(ss->n[s] - i - 1) * sizeof *a);
            ss->n[s]++;
            a[1] = (gr_pipe_action){up ? GR_PIPE_RECV_GRAD : GR_PIPE_RECV_ACT, a->recv_mb, -1, a->peer};
            *a = (gr_pipe_action){up ? GR_PIPE_SEND_ACT : GR_PIPE_SEND_GRAD, a->mb, -1, a->peer};
        }
}

static void sim_swap(sim_sched *ss, int s, int i, int j) {
    gr_pipe_action t = ss->a[s][i];
    ss->a[s][i] = ss->a[s][j];
    ss->a[s][j] = t;
}

/* The simulator's teeth: broken schedules fail, each in the way expected. */
static void test_broken(void) {
    static sim_sched ss;
    gr_pipe_schedule sc;
    gr_error err = {0};
    long span;
    char why[512] = "";
    /* 1f1b with its SENDRECVs as send-then-receive: both neighbours send */
    CHECK(gr_pipe_schedule_init(&sc, 2, 4, GR_PIPE_1F1B, &err) == GR_OK);
    sim_load(&ss, &sc);
    CHECK(sim_check(&ss, GR_PIPE_1F1B, 1, 2, &span, why, sizeof why));
    sim_split_sendrecv(&ss);
    CHECK(!sim_check(&ss, GR_PIPE_1F1B, 1, 2, &span, why, sizeof why));
    CHECK_STR_CONTAINS(why, "deadlock");
    /* the last stage's first backward before its forward (no message between) */
    sim_load(&ss, &sc);
    CHECK(ss.a[1][1].op == GR_PIPE_FORWARD && ss.a[1][2].op == GR_PIPE_BACKWARD);
    sim_swap(&ss, 1, 1, 2);
    CHECK(!sim_check(&ss, GR_PIPE_1F1B, 1, 2, &span, why, sizeof why));
    CHECK_STR_CONTAINS(why, "backward(0) before its forward");
    /* stage 0's last backward dropped */
    sim_load(&ss, &sc);
    ss.n[0]--;
    CHECK(!sim_check(&ss, GR_PIPE_1F1B, 1, 2, &span, why, sizeof why));
    CHECK_STR_CONTAINS(why, "ran 1 forwards, 0 backwards");
    gr_pipe_schedule_free(&sc);
    /* gpipe with stage 0's first two activations sent out of order */
    CHECK(gr_pipe_schedule_init(&sc, 3, 3, GR_PIPE_GPIPE, &err) == GR_OK);
    sim_load(&ss, &sc);
    CHECK(ss.a[0][1].op == GR_PIPE_SEND_ACT && ss.a[0][3].op == GR_PIPE_SEND_ACT);
    sim_swap(&ss, 0, 1, 3);
    CHECK(!sim_check(&ss, GR_PIPE_GPIPE, 1, 1, &span, why, sizeof why));
    CHECK_STR_CONTAINS(why, "deadlock");
    /* a gpipe schedule judged by 1f1b's memory bound */
    sim_load(&ss, &sc);
    CHECK(!sim_check(&ss, GR_PIPE_1F1B, 1, 1, &span, why, sizeof why));
    CHECK_STR_CONTAINS(why, "stage 1 holds 3 activations at most; expected 2");
    gr_pipe_schedule_free(&sc);
}

/* Arguments, names and the closed-form figures. */
static void test_api(void) {
    gr_pipe_schedule sc;
    gr_error err = {0};
    CHECK(gr_pipe_schedule_init(&sc, 0, 4, GR_PIPE_1F1B, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "pipeline: 0 stages; need 1 to 4096");
    CHECK(sc.actions == NULL && sc.start == NULL);
    gr_pipe_schedule_free(&sc);
    CHECK(gr_pipe_schedule_init(&sc, 4, 0, GR_PIPE_GPIPE, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "pipeline: 0 micro-batches; need 1 to");
    CHECK(gr_pipe_schedule_init(&sc, 4097, 1, GR_PIPE_GPIPE, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "4097 stages");
    CHECK(gr_pipe_schedule_init(&sc, 4096, 1 << 20, GR_PIPE_GPIPE, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "4096 stages x 1048576 micro-batches is over");
    CHECK(gr_pipe_schedule_init(&sc, 2, 2, (gr_pipe_kind)7, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "schedule kind 7");
    gr_pipe_kind k = GR_PIPE_GPIPE;
    CHECK(gr_pipe_kind_parse("1f1b", &k, &err) == GR_OK && k == GR_PIPE_1F1B);
    CHECK(gr_pipe_kind_parse("gpipe", &k, &err) == GR_OK && k == GR_PIPE_GPIPE);
    CHECK(gr_pipe_kind_parse("1F1B", &k, &err) == GR_ERR_USAGE);
    CHECK_STR_CONTAINS(err.msg, "unknown schedule '1F1B'; expected gpipe or 1f1b");
    CHECK(!strcmp(gr_pipe_kind_name(GR_PIPE_1F1B), "1f1b"));
    CHECK(!strcmp(gr_pipe_op_name(GR_PIPE_SEND_GRAD_RECV_ACT), "send_grad_recv_act"));
    CHECK(gr_pipe_bubble_fraction(0, 3) < 0 && gr_pipe_bubble_fraction(3, 0) < 0);
    CHECK_CLOSE(gr_pipe_bubble_fraction(4, 8), 3.0 / 11.0, 0, 1e-15);
    CHECK(gr_pipe_bubble_fraction(1, 5) == 0.0);
    CHECK(gr_pipe_peak_activations(GR_PIPE_1F1B, 4, 8, 0) == 4);
    CHECK(gr_pipe_peak_activations(GR_PIPE_1F1B, 4, 2, 1) == 2);
    CHECK(gr_pipe_peak_activations(GR_PIPE_GPIPE, 4, 8, 3) == 8);
    CHECK(gr_pipe_peak_activations(GR_PIPE_1F1B, 4, 8, 4) == -1);
    /* the 1f1b lists of p = 2, m = 3, spelled out */
    CHECK(gr_pipe_schedule_init(&sc, 2, 3, GR_PIPE_1F1B, &err) == GR_OK);
    static const gr_pipe_action s0[] = {
        {GR_PIPE_FORWARD, 0, -1, -1},           {GR_PIPE_SEND_ACT, 0, -1, 1},
        {GR_PIPE_FORWARD, 1, -1, -1},           {GR_PIPE_SEND_ACT_RECV_GRAD, 1, 0, 1},
        {GR_PIPE_BACKWARD, 0, -1, -1},          {GR_PIPE_FORWARD, 2, -1, -1},
        {GR_PIPE_SEND_ACT_RECV_GRAD, 2, 1, 1},  {GR_PIPE_BACKWARD, 1, -1, -1},
        {GR_PIPE_RECV_GRAD, 2, -1, 1},          {GR_PIPE_BACKWARD, 2, -1, -1},
    };
    static const gr_pipe_action s1[] = {
        {GR_PIPE_RECV_ACT, 0, -1, 0},           {GR_PIPE_FORWARD, 0, -1, -1},
        {GR_PIPE_BACKWARD, 0, -1, -1},          {GR_PIPE_SEND_GRAD_RECV_ACT, 0, 1, 0},
        {GR_PIPE_FORWARD, 1, -1, -1},           {GR_PIPE_BACKWARD, 1, -1, -1},
        {GR_PIPE_SEND_GRAD_RECV_ACT, 1, 2, 0},  {GR_PIPE_FORWARD, 2, -1, -1},
        {GR_PIPE_BACKWARD, 2, -1, -1},          {GR_PIPE_SEND_GRAD, 2, -1, 0},
    };
    int n0, n1;
    const gr_pipe_action *a0 = gr_pipe_stage(&sc, 0, &n0), *a1 = gr_pipe_stage(&sc, 1, &n1);
    CHECK(n0 == 10 && !memcmp(a0, s0, sizeof s0));
    CHECK(n1 == 10 && !memcmp(a1, s1, sizeof s1));
    gr_pipe_schedule_free(&sc);
}

int main(void) {
    test_api();
    test_sweep();
    test_broken();
    return gr_test_report();
}
