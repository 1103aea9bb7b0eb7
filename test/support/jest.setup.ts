import { Logger } from '@nestjs/common';

// Tests assert on behaviour; the module's warnings about the faults they inject are expected noise.
// DEBUG_LOGS=1 npm test shows them.
if (!process.env.DEBUG_LOGS) Logger.overrideLogger(false);
// The SDK's notice about its future Node.js 22 requirement is for operators, not test output.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
