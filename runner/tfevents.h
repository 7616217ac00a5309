/* tfevents.h — TensorBoard scalar logging: writes the run directory's
 * events.out.tfevents.<unix seconds>.<hostname> file (DESIGN 1.3).
 *
 * The file is a TFRecord stream: each record is
 *   uint64 length (LE) | uint32 masked_crc32c(length) | data | uint32 masked_crc32c(data)
 * with masked = ((crc >> 15) | (crc << 17)) + 0xa282ead8. Each record's data
 * is a tensorflow.Event protobuf, encoded here by hand: the first carries
 * file_version "brain.Event:2", the others one Summary.Value with a tag and
 * a simple_value. TensorBoard reads it as it grows.
 *
 * Exports gr_tfevents_open / _scalar / _flush / _close, the file's path,
 * and the Unix wall clock that Event.wall_time wants. Write failures are
 * sticky: _scalar records the first one, and _flush / _close report it with
 * the path and strerror as GR_ERR_USAGE (like the run directory's other
 * files). */
#ifndef GR_TFEVENTS_H
#define GR_TFEVENTS_H

#include <stdint.h>

#include "../common/gr_common.h"

typedef struct gr_tfevents gr_tfevents;

/* Longest tag accepted (bytes); a longer one is a bug (GR_ASSERT). */
#define GR_TFEVENTS_TAG_MAX 256

/* Creates dir/events.out.tfevents.<unix seconds>.<hostname> (dir must exist;
 * when that name is taken, ".1", ".2", ... is appended) and writes the
 * file_version event. */
gr_status gr_tfevents_open(const char *dir, gr_tfevents **out, gr_error *err);

/* Appends one scalar event (buffered). Returns GR_ERR_USAGE when this or an
 * earlier write failed; the message comes from _flush or _close. */
gr_status gr_tfevents_scalar(gr_tfevents *w, const char *tag, int64_t step, double wall_time, float value);

/* Pushes buffered events to the file; reports any write failure so far. */
gr_status gr_tfevents_flush(gr_tfevents *w, gr_error *err);

/* Flushes, closes and frees w (NULL is a no-op); reports any write failure. */
gr_status gr_tfevents_close(gr_tfevents *w, gr_error *err);

/* The file being written. */
const char *gr_tfevents_path(const gr_tfevents *w);

/* After a resume from step: drops from dir's event files (all but the one
 * named except, this process's) every record past step, and a torn last
 * record, so TensorBoard sees each step once, as in metrics.jsonl. */
gr_status gr_tfevents_trim(const char *dir, int64_t step, const char *except, gr_error *err);

/* Seconds since the Unix epoch (CLOCK_REALTIME), for Event.wall_time. */
double gr_tfevents_wall_time(void);

#endif
