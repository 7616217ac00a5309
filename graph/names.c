/* names.c — the string -> int table of names.h. Open addressing with linear
 * probing over a power-of-two array that doubles at half full, so a probe
 * sequence stays short and a put or get costs O(1) expected. */
#include "names.h"

#include <stdlib.h>
#include <string.h>

static uint64_t gr_names_hash(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, 64-bit */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) h = (h ^ *p) * 0x100000001b3ull;
    return h;
}

void gr_names_init(gr_names *t) { memset(t, 0, sizeof *t); }

void gr_names_free(gr_names *t) {
    for (size_t i = 0; i < t->cap; i++) free(t->slots[i].key);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

/* The slot holding key, or the empty slot where it would go. */
static gr_names_slot *gr_names_slot_of(const gr_names *t, const char *key, uint64_t h) {
    size_t mask = t->cap - 1;
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        gr_names_slot *s = &t->slots[i];
        if (!s->key || (s->hash == h && strcmp(s->key, key) == 0)) return s;
    }
}

static void gr_names_grow(gr_names *t) {
    gr_names old = *t;
    t->cap = old.cap ? 2 * old.cap : GR_GROW_STRESS ? 2 : 64; /* small under the stress build: it moves often */
    t->slots = gr_xcalloc(t->cap, sizeof *t->slots);
    for (size_t i = 0; i < old.cap; i++)
        if (old.slots[i].key) *gr_names_slot_of(t, old.slots[i].key, old.slots[i].hash) = old.slots[i];
    free(old.slots);
}

void gr_names_put(gr_names *t, const char *key, int value) {
    if (2 * (t->n + 1) > t->cap) gr_names_grow(t);
    uint64_t h = gr_names_hash(key);
    gr_names_slot *s = gr_names_slot_of(t, key, h);
    if (!s->key) {
        s->key = gr_xstrdup(key);
        s->hash = h;
        t->n++;
    }
    s->value = value;
}

int gr_names_get(const gr_names *t, const char *key) {
    if (!t->cap) return -1;
    const gr_names_slot *s = gr_names_slot_of(t, key, gr_names_hash(key));
    return s->key ? s->value : -1;
}
