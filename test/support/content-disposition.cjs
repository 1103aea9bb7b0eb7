// content-disposition under Jest, for both of its users: Express requires version 1 (`contentDisposition(name)`),
// @fastify/static 10 version 2 (`const { create } = require('content-disposition')`). Version 2 is an ES module only,
// which Jest's CommonJS runtime cannot load (Node can): version 1, hoisted to the root, makes the same header, so it
// answers both ways.
const contentDisposition = require('../../node_modules/content-disposition/index.js');
contentDisposition.create = contentDisposition;
module.exports = contentDisposition;
