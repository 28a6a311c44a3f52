/** The routing library: everything that decides. Imports no Azure Functions API (docs/design.md §1). */
export * from './clock';
export * from './config';
export * from './errors';
export * from './lock/document';
export * from './lock/rules';
export * from './lock/state';
export * from './lock/token';
export * from './lock/view';
export * from './router';
export * from './regions';
export * from './store/ports/locations';
export * from './store/sqlite/locations';
export * from './store/cosmos/locations';
export * from './store/open';
export * from './client';
