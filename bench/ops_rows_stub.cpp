// Placeholder for the row ops' bench cases (softmax, norms, rope) until bench/ops_rows.cpp
// provides them: weak, so that the real definition wins when both are linked.
#include "kaio/bench/ops_case.h"

namespace kaio::bench {

__attribute__((weak)) std::vector<OpCase> row_op_cases(ir::Scalar, uint32_t, uint32_t) { return {}; }

}  // namespace kaio::bench
