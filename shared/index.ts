/** The routing library: everything that decides. Imports no Azure Functions API (docs/design.md §1). */
export * from './core/clock';
export * from './config';
export * from './core/errors';
export * from './core/lock/document';
export * from './core/lock/rules';
export * from './core/lock/state';
export * from './core/lock/token';
export * from './core/lock/view';
export * from './core/router';
export * from './core/regions';
export * from './core/store/ports/locations';
export * from './core/store/sqlite/locations';
export * from './core/store/cosmos/locations';
export * from './stores';
export * from './core/client';
