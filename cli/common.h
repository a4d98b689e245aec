// Options shared by the commands that load a model and generate (run, chat, serve, bench).
#pragma once

#include <string>

#include "cli/args.h"
#include "runtime/generator.h"
#include "runtime/loader.h"
#include "runtime/session.h"

namespace pipit::cli {

void add_model_options(Args& a);     // -m, -t, -c, --kv-type
void add_sampling_options(Args& a);  // --temp, --top-k, --top-p, --min-p, --repeat-penalty, --seed, -n, --stop
Result<SessionOptions> session_options(const Args& a);
Result<DType> kv_type(const Args& a);                 // --kv-type f32 | f16 | q8
Status check_kv_type(const Model& m, DType kv);       // q8 needs head_dim % 32 == 0
Result<GenerateParams> generate_params(const Args& a);

}  // namespace pipit::cli
