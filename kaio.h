#pragma once
#include "kaio/ir/builder.h"
