// role-based-email-addresses ships CommonJS without types: module.exports is the array of all roles.
declare module "role-based-email-addresses" {
  const roles: readonly string[];
  export default roles;
}
