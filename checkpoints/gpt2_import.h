/* gpt2_import.h — model.init_from: gpurun's HDF5 weights (weights.h), and
 * GPT-2 weights as people have them: Hugging Face's model.safetensors
 * (safetensors.h) and llm.c's gpt2_124M.bin, each mapped onto a model built
 * with configs/gpt2-124m.yaml's names (DESIGN 1.4, "GPT-2 weights").
 *
 * The names, one table (gpt2_import.c), in llm.c's order; per block use i
 * (`h` with repeat: h0, h1, ...), "h<i>." before gpurun's and "h.<i>."
 * before Hugging Face's; * marks a Conv1D weight, which Hugging Face
 * stores [in, out] and is transposed into gpurun's (nn.Linear's) [out, in]:
 *
 *   gpurun               Hugging Face          llm.c
 *   wte.weight [Vp, C]   wte.weight [V, C]     wte [Vp, C]
 *   wpe.weight [T, C]    wpe.weight            wpe [maxT, C]
 *   h<i>.ln_1.weight     h.<i>.ln_1.weight     ln1w[i]       (and .bias: ln1b)
 *   h<i>.c_attn.weight   h.<i>.attn.c_attn.weight *  qkvw[i] [3C, C]  (.bias: qkvb)
 *   h<i>.c_proj.weight   h.<i>.attn.c_proj.weight *  attprojw[i]      (.bias: attprojb)
 *   h<i>.ln_2.weight     h.<i>.ln_2.weight     ln2w[i]       (.bias: ln2b)
 *   h<i>.c_fc.weight     h.<i>.mlp.c_fc.weight *     fcw[i] [4C, C]   (.bias: fcb)
 *   h<i>.mlp_proj.weight h.<i>.mlp.c_proj.weight *   fcprojw[i] [C, 4C] (.bias: fcprojb)
 *   ln_f.weight          ln_f.weight           lnfw          (.bias: lnfb)
 *
 * Hugging Face's names may carry GPT2LMHeadModel's "transformer." prefix.
 * The LM head is tied to wte (lm_head.weight, if present, is listed as
 * ignored, as are the causal-mask buffers h.<i>.attn.bias/masked_bias). An
 * embedding stored with fewer rows than the model's wte (50257 < 50304) is
 * copied into its first rows, the rest zero (said once on stderr). Every
 * model tensor must be in the table and in the file with its shape, its
 * values finite; file tensors the model lacks are listed on stderr and
 * ignored. Every error is GR_ERR_CKPT (exit 6) naming the file. */
#ifndef GR_GPT2_IMPORT_H
#define GR_GPT2_IMPORT_H

#include "../graph/graph.h"

/* llm.c's checkpoint: 256 little-endian int32 (magic, version, maxT, V, L,
 * NH, C, Vp, ...), then the parameters. */
#define GR_LLMC_MAGIC 20240326
#define GR_LLMC_HEADER_INTS 256

/* model.init_from: reads every PARAM and STATE tensor of g from path into
 * params, the format from the file's first bytes: HDF5's signature
 * "\x89HDF\r\n\x1a\n" (gr_weights_load), llm.c's magic
 * (gr_gpt2_load_llmc), else safetensors (gr_gpt2_load_safetensors). */
gr_status gr_init_from_load(const char *path, const gr_graph *g, float *params, gr_error *err);

/* A Hugging Face GPT-2 model.safetensors (F32, F16 or BF16) into g. */
gr_status gr_gpt2_load_safetensors(const char *path, const gr_graph *g, float *params, gr_error *err);

/* llm.c's GPT-2 checkpoint (version 3: fp32, 5: bf16 parameters) into g;
 * its size must be exactly the header's. */
gr_status gr_gpt2_load_llmc(const char *path, const gr_graph *g, float *params, gr_error *err);

#endif
